// Package table prints a command's listing: a JSON array, or a table whose
// cells are escaped and cut to fit a screen.
package table

import (
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"
)

// Print prints a listing: a JSON array with asJSON (empty, not null, when
// there are no items), otherwise a table of header and one row of cells per
// item, each cut to fit (Cell).
func Print[T any](w io.Writer, asJSON bool, items []T, header []string, row func(T) []string) error {
	if asJSON {
		if items == nil {
			items = []T{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(items)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	io.WriteString(tw, strings.Join(header, "\t")+"\n") //nolint:errcheck // Flush reports it
	for _, it := range items {
		cells := row(it)
		for i, c := range cells {
			width := MaxCell
			if i == len(cells)-1 {
				width = MaxLastCell
			}
			cells[i] = Cell(c, width)
		}
		io.WriteString(tw, strings.Join(cells, "\t")+"\n") //nolint:errcheck // Flush reports it
	}
	return tw.Flush()
}

// The widest cells of a table, in characters: one long message id must not
// push every other column off the screen. The last column (a reason, an
// error) widens no other, and is read most: it is cut later. --json, and
// `dlq show`, give the whole value.
const (
	MaxCell     = 40
	MaxLastCell = 200
)

// Cell fits a value into a table cell: escaped when it holds bytes that are
// not printable text (a tab or newline would break the table), and cut to
// width characters, ending in "…".
func Cell(s string, width int) string {
	if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		s = strconv.Quote(s)
		s = s[1 : len(s)-1]
	}
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	return string([]rune(s)[:width-1]) + "…"
}
