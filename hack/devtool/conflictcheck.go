package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// retryPackage is client-go's retry package: a write inside a function literal passed to its
// RetryOnConflict or OnError is taken to re-read the object on each attempt.
const retryPackage = "k8s.io/client-go/util/retry"

// safeMark starts the comment that declares an Update safe without a retry; a reason follows.
const safeMark = "//conflict-safe:"

// conflictHint is what a finding tells its author to do.
const conflictHint = "re-read the object inside retry.RetryOnConflict (testutil.Edit, testutil.EditStatus) or write a patch " +
	"(client.MergeFrom, client.StrategicMergeFrom); if nothing else writes the object, or a refusal is expected, " +
	"say so with " + safeMark + " <reason> on the line of the call or the line before"

// A conflictFinding is an Update that another writer of the object can turn into a Conflict.
type conflictFinding struct {
	pos  token.Position
	call string // the called expression as written, k8s.Status().Update
	what string // why it is reported
}

func (f conflictFinding) String() string {
	return fmt.Sprintf("%s: %s %s: %s", f.pos, f.call, f.what, conflictHint)
}

// conflictCheck reports, one line each on w, the Updates in the Go files that patterns name
// (DIR, DIR/... for the tree under it, or FILE) that a concurrent writer can make fail: a
// test that reads an object the cluster writes too (a pod, a Deployment, a SidecarSet whose
// status the operator writes) and updates it later fails now and then with "the object has
// been modified". It fails when there is any. The check is lexical (no type information):
// it sees calls X.Update(ctx, ...) and X.UpdateStatus(ctx, ...), X included
// k8s.Status() and k8s.SubResource("resize").
func conflictCheck(patterns []string, w io.Writer) error {
	files, err := goFiles(patterns)
	if err != nil {
		return err
	}
	fset := token.NewFileSet()
	found := 0
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		findings, err := checkConflicts(fset, path, src)
		if err != nil {
			return err
		}
		for _, f := range findings {
			if _, err := fmt.Fprintln(w, f); err != nil {
				return err
			}
		}
		found += len(findings)
	}
	if found > 0 {
		return fmt.Errorf("conflictcheck: %d updates may fail with a conflict (%d files checked)", found, len(files))
	}
	return nil
}

// goFiles lists the .go files patterns name, in order, each once. Below DIR/..., directories
// the go command ignores (testdata, vendor, names starting with . or _) are skipped.
func goFiles(patterns []string) ([]string, error) {
	var files []string
	for _, p := range patterns {
		if root, ok := strings.CutSuffix(p, "..."); ok {
			root = filepath.Clean(strings.TrimSuffix(root, "/"))
			err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				if d.IsDir() && path != root && ignoredDir(d.Name()) {
					return filepath.SkipDir
				}
				if !d.IsDir() && strings.HasSuffix(path, ".go") {
					files = append(files, path)
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
			continue
		}
		info, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			files = append(files, p)
			continue
		}
		matches, err := filepath.Glob(filepath.Join(p, "*.go"))
		if err != nil {
			return nil, err
		}
		files = append(files, matches...)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("conflictcheck: no Go files in %s", strings.Join(patterns, " "))
	}
	slices.Sort(files)
	return slices.Compact(files), nil
}

func ignoredDir(name string) bool {
	return name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

// checkConflicts returns the unguarded Updates of one file: not inside a function literal
// passed to retry.RetryOnConflict or retry.OnError, and not marked safe.
func checkConflicts(fset *token.FileSet, name string, src []byte) ([]conflictFinding, error) {
	file, err := parser.ParseFile(fset, name, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	retryNames := importNames(file, retryPackage)
	marks := safeMarks(fset, file)
	var findings []conflictFinding
	ast.PreorderStack(file, nil, func(n ast.Node, stack []ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || !isUpdate(call) || insideRetry(stack, retryNames) {
			return true
		}
		start := fset.Position(call.Pos())
		method := fset.Position(call.Fun.(*ast.SelectorExpr).Sel.Pos())
		what := "outside retry.RetryOnConflict"
		for _, line := range []int{start.Line, start.Line - 1, method.Line, method.Line - 1} {
			if reason, ok := marks[line]; ok {
				if reason != "" {
					return true
				}
				what = "marked " + safeMark + " without a reason"
			}
		}
		findings = append(findings, conflictFinding{pos: start, call: types.ExprString(call.Fun), what: what})
		return true
	})
	return findings, nil
}

// importNames is the set of names file refers to the package path by.
func importNames(file *ast.File, path string) map[string]bool {
	names := map[string]bool{}
	for _, imp := range file.Imports {
		if p, err := strconv.Unquote(imp.Path.Value); err != nil || p != path {
			continue
		}
		switch {
		case imp.Name == nil:
			names[filepath.Base(path)] = true
		case imp.Name.Name != "_" && imp.Name.Name != ".":
			names[imp.Name.Name] = true
		}
	}
	return names
}

// safeMarks maps the line of each //conflict-safe: comment to its reason.
func safeMarks(fset *token.FileSet, file *ast.File) map[int]string {
	marks := map[int]string{}
	for _, group := range file.Comments {
		for _, c := range group.List {
			if reason, ok := strings.CutPrefix(c.Text, safeMark); ok {
				marks[fset.Position(c.Slash).Line] = strings.TrimSpace(reason)
			}
		}
	}
	return marks
}

// isUpdate tells a client's Update (ctx, object, options...) from other methods named so.
func isUpdate(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	return ok && (sel.Sel.Name == "Update" || sel.Sel.Name == "UpdateStatus") && len(call.Args) >= 2
}

// insideRetry tells whether the innermost node of stack lies in a function literal that is
// an argument of retry.RetryOnConflict or retry.OnError (retry being any of retryNames).
func insideRetry(stack []ast.Node, retryNames map[string]bool) bool {
	for i := len(stack) - 1; i > 0; i-- {
		lit, ok := stack[i].(*ast.FuncLit)
		if !ok {
			continue
		}
		if call, ok := stack[i-1].(*ast.CallExpr); ok && isRetry(call, retryNames) && slices.Contains(call.Args, ast.Expr(lit)) {
			return true
		}
	}
	return false
}

func isRetry(call *ast.CallExpr, retryNames map[string]bool) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && retryNames[pkg.Name] && (sel.Sel.Name == "RetryOnConflict" || sel.Sel.Name == "OnError")
}
