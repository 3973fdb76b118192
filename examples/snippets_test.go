// Package examples holds whole programs, one per directory, compiled and run
// by their tests. This file checks that the docs' Go snippets are cut from
// them, so that every snippet compiles and runs by construction.
//
// In a .go file under examples/, a region is the lines between
// "// snippet:NAME" and "// end snippet". In README.md or docs/*.md,
// "<!-- snippet:NAME -->" followed by a ```go block marks that block as
// region NAME, dedented. go test ./examples -run Snippets -update rewrites
// the marked blocks from the regions.
package examples

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the docs' marked snippets from the examples")

var (
	regionStart = regexp.MustCompile(`^\s*// snippet:([A-Za-z0-9_.-]+)\s*$`)
	regionEnd   = regexp.MustCompile(`^\s*// end snippet\s*$`)
	docMarker   = regexp.MustCompile(`^<!-- snippet:([A-Za-z0-9_.-]+) -->\s*$`)
)

// regions reads every marked region of the .go files under dir.
func regions(dir string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		name, start := "", 0
		lines := strings.Split(string(b), "\n")
		for i, l := range lines {
			if m := regionStart.FindStringSubmatch(l); m != nil {
				if name != "" {
					return fmt.Errorf("%s:%d: snippet %s opened inside %s", path, i+1, m[1], name)
				}
				if _, dup := out[m[1]]; dup {
					return fmt.Errorf("%s:%d: snippet %s marked twice", path, i+1, m[1])
				}
				name, start = m[1], i+1
			} else if regionEnd.MatchString(l) {
				if name == "" {
					return fmt.Errorf("%s:%d: end snippet without a start", path, i+1)
				}
				out[name] = dedent(strings.TrimRight(strings.Join(lines[start:i], "\n"), "\n"))
				name = ""
			}
		}
		if name != "" {
			return fmt.Errorf("%s: snippet %s never ended", path, name)
		}
		return nil
	})
	return out, err
}

// dedent removes the leading tabs every non-empty line shares.
func dedent(s string) string {
	lines := strings.Split(s, "\n")
	least := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if n := len(l) - len(strings.TrimLeft(l, "\t")); least < 0 || n < least {
			least = n
		}
	}
	for i, l := range lines {
		if len(l) >= least && least > 0 {
			lines[i] = l[least:]
		}
	}
	return strings.Join(lines, "\n")
}

// block is one marked snippet of a doc: its name and its lines' span.
type block struct {
	name       string
	line       int // the marker's, 1-based
	start, end int // the block's body, lines[start:end]
}

// blocks finds the marked ```go blocks of a doc's lines.
func blocks(file string, lines []string) ([]block, error) {
	var out []block
	for i, l := range lines {
		m := docMarker.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		j := i + 1
		for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
			j++
		}
		if j == len(lines) || strings.TrimSpace(lines[j]) != "```go" {
			return nil, fmt.Errorf("%s:%d: snippet %s is not followed by a ```go block", file, i+1, m[1])
		}
		k := j + 1
		for k < len(lines) && strings.TrimSpace(lines[k]) != "```" {
			k++
		}
		if k == len(lines) {
			return nil, fmt.Errorf("%s:%d: snippet %s's block never closes", file, i+1, m[1])
		}
		out = append(out, block{name: m[1], line: i + 1, start: j + 1, end: k})
	}
	return out, nil
}

func TestDocSnippetsAreCutFromExamples(t *testing.T) {
	t.Parallel()
	got, err := regions(".")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, filepath.Join("..", "README.md"))
	marked := 0
	for _, doc := range docs {
		changed := false
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		bs, err := blocks(doc, lines)
		if err != nil {
			t.Fatal(err)
		}
		for i := len(bs) - 1; i >= 0; i-- { // from the end, so that rewriting keeps earlier spans
			bl := bs[i]
			want, ok := got[bl.name]
			if !ok {
				t.Errorf("%s:%d: snippet %s is marked in no example", doc, bl.line, bl.name)
				continue
			}
			if have := strings.Join(lines[bl.start:bl.end], "\n"); have != want {
				if !*update {
					t.Errorf("%s:%d: snippet %s differs from its region in examples/ (go test ./examples -run Snippets -update rewrites it):\n--- doc\n%s\n--- example\n%s", doc, bl.line, bl.name, have, want)
					continue
				}
				lines = append(lines[:bl.start], append(strings.Split(want, "\n"), lines[bl.end:]...)...)
				changed = true
			}
		}
		marked += len(bs)
		if changed {
			if err := os.WriteFile(doc, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if marked == 0 {
		t.Fatal("no doc marks a snippet: docs/library.md should")
	}
}

// The checker itself: regions are dedented, and a marker must precede a
// closed ```go block.
func TestSnippetMarkers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := "package x\n\nfunc f() {\n\t// snippet:a\n\tif true {\n\t\treturn\n\t}\n\t// end snippet\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := regions(dir)
	if err != nil || got["a"] != "if true {\n\treturn\n}" {
		t.Fatalf("regions: %q, %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "y.go"), []byte("// snippet:b\n"), 0o644); err == nil {
		if _, err := regions(dir); err == nil {
			t.Fatal("an unended region: no error")
		}
	}
	bs, err := blocks("d.md", strings.Split("<!-- snippet:a -->\n\n```go\nx\n```\n", "\n"))
	if err != nil || len(bs) != 1 || bs[0].start != 3 || bs[0].end != 4 {
		t.Fatalf("blocks: %+v, %v", bs, err)
	}
	for _, doc := range []string{"<!-- snippet:a -->\ntext\n", "<!-- snippet:a -->\n```go\nx\n"} {
		if _, err := blocks("d.md", strings.Split(doc, "\n")); err == nil {
			t.Fatalf("blocks(%q): no error", doc)
		}
	}
}
