package cli

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"
)

// fileFlags are -f and -R of the commands that read objects (readInput).
type fileFlags struct {
	file      string
	recursive bool
}

func (f *fileFlags) add(cmd *cobra.Command, what string) {
	cmd.Flags().StringVarP(&f.file, "filename", "f", "", what+" (YAML or JSON: a file, a directory, or - for standard input)")
	cmd.Flags().BoolVarP(&f.recursive, "recursive", "R", false, "read the directory -f names and every directory under it")
}

// inputExtensions are the files of a directory that -f reads, as kubectl reads them.
var inputExtensions = []string{".json", ".yaml", ".yml"}

// inputFiles lists the files -f path names: path itself when it is a file (whatever its name),
// else the .json, .yaml and .yml files of the directory in lexical order, and with recursive
// those of every directory under it, depth first, as kubectl's -f DIR and -R read them.
func inputFiles(path string, recursive bool) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	var files []string
	skipped := false // a directory left out without -R
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && p != path && !recursive:
			skipped = true
			return filepath.SkipDir
		case !d.IsDir() && slices.Contains(inputExtensions, filepath.Ext(p)):
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		hint := ""
		if skipped {
			hint = " (-R reads the directories under it)"
		}
		return nil, fmt.Errorf("directory %s holds no .json, .yaml or .yml file%s", path, hint)
	}
	return files, nil
}
