package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// maxFuncLines bounds a function, from func to its closing brace.
const maxFuncLines = 80

var generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

// TestNoFunctionOver80Lines: no function of the module's non-test Go files,
// generated code aside, is longer than 80 lines.
func TestNoFunctionOver80Lines(t *testing.T) {
	t.Parallel()
	var offenders []string
	root := "../.."
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil || generated.Match(src) {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxFuncLines {
				rel, _ := filepath.Rel(root, path)
				offenders = append(offenders, filepath.ToSlash(rel)+": "+fn.Name.Name+" ("+strconv.Itoa(n)+" lines)")
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(offenders) > 0 {
		t.Fatalf("functions over %d lines:\n%s", maxFuncLines, strings.Join(offenders, "\n"))
	}
}

// The command line's measured shape: a thin shell over the library.
const (
	maxShellLines    = 3240 // non-test lines of cmd/jetledger, internal/bench aside (3 000 until fleet and hub, 3 100 until console, 3 160 until group; their logic is in packages fleet, console, group and service)
	maxShellFileLine = 250  // non-test lines of one file there
)

// TestCommandLineIsAThinShell: cmd/jetledger's non-test files, its bench
// aside, hold at most 3 160 lines, none more than 250.
func TestCommandLineIsAThinShell(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	total, shell := 0, 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		shell++
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n := strings.Count(string(src), "\n")
		if n > maxShellFileLine {
			t.Errorf("%s: %d lines, over %d", f, n, maxShellFileLine)
		}
		total += n
	}
	if total > maxShellLines {
		t.Errorf("cmd/jetledger: %d non-test lines, over %d: move what is not the command line into a package", total, maxShellLines)
	}
	t.Logf("cmd/jetledger: %d non-test lines in %d files", total, shell)
}
