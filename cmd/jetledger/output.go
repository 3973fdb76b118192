package main

import (
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"github.com/jetledger/jetledger/ledger"
)

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// ledgerNames are what the ledger's refusals call the flags.
var ledgerNames = map[string]string{"Status": "--status", "Limit": "--limit", "As": "--as", "ExternalID": "--external-id"}

// listRows checks the listing l asks for (ledger.Listing.Check), then
// prints the rows fetch reads from the ledger of db as printList does.
func listRows[T any](inv *invocation, db dbFlag, asJSON bool, l ledger.Listing, fetch func(*ledger.Store) ([]T, error), header []string, row func(T) []string) error {
	l.Names = ledgerNames
	if err := l.Check(); err != nil {
		return configUsage(err)
	}
	return db.withStore(func(st *ledger.Store) error {
		items, err := fetch(st)
		if err != nil {
			return err
		}
		return printList(inv.stdout, asJSON, items, header, row)
	})
}

// printList prints a listing: a JSON array with asJSON (empty, not null, when
// there are no items), otherwise a table of header and one row of cells per
// item, each cut to fit (cell).
func printList[T any](w io.Writer, asJSON bool, items []T, header []string, row func(T) []string) error {
	if asJSON {
		if items == nil {
			items = []T{}
		}
		return printJSON(w, items)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	io.WriteString(tw, strings.Join(header, "\t")+"\n") //nolint:errcheck // Flush reports it
	for _, it := range items {
		cells := row(it)
		for i, c := range cells {
			width := maxCell
			if i == len(cells)-1 {
				width = maxLastCell
			}
			cells[i] = cell(c, width)
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
	maxCell     = 40
	maxLastCell = 200
)

// cell fits a value into a table cell: escaped when it holds bytes that are
// not printable text (a tab or newline would break the table), and cut to
// width characters, ending in "…".
func cell(s string, width int) string {
	if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		s = strconv.Quote(s)
		s = s[1 : len(s)-1]
	}
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	return string([]rune(s)[:width-1]) + "…"
}
