package testutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// DocTable returns the rows of the Markdown table in the repository's document doc (a path
// from the repository's root) whose header line starts with header: each row's cells, trimmed
// of spaces and backquotes. It fails the test when the document has no such table. Tests that
// keep a document's table and the code's catalog the same read it with this.
func DocTable(t testing.TB, doc, header string) [][]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(RepoRoot(t), doc))
	Must(t, err)
	text := string(raw)
	start := strings.Index(text, header)
	if start < 0 {
		t.Fatalf("%s has no table headed %q", doc, header)
	}
	var rows [][]string
	for _, line := range strings.Split(text[start:], "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.Trim(cells[i], " `")
		}
		rows = append(rows, cells)
	}
	return rows
}
