package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/jetledger/jetledger/ledger"
)

// subcommand splits "<sub> [ID] [flags]" for the commands with subcommands
// (ledger, outbox, dlq). With no arguments or --help it prints usage; the
// ID, when sub is one of withID, may come before or after the flags' start.
func subcommand(args []string, usageLine, help string, withID []string, stdout io.Writer) (sub, id string, rest []string, err error) {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintf(stdout, "Usage: %s\n%s\n", usageLine, help)
		if len(args) == 0 {
			return "", "", nil, usagef("missing subcommand")
		}
		return "", "", nil, errHelp
	}
	sub, rest = args[0], args[1:]
	if slices.Contains(withID, sub) && len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		id, rest = rest[0], rest[1:]
	}
	return sub, id, rest, nil
}

// openExisting opens a ledger that must already exist: inspecting commands
// never create an empty database by mistake.
func openExisting(db string) (*ledger.Store, error) {
	if _, err := os.Stat(db); err != nil {
		return nil, fmt.Errorf("ledger %s: %w (give the database with --db)", db, err)
	}
	return ledger.Open(db, ledger.Config{})
}

// printList prints a listing: a JSON array with asJSON (empty, not null, when
// there are no items), otherwise a table of header and one row per item, the
// row's cells separated by tabs.
func printList[T any](w io.Writer, asJSON bool, items []T, header string, row func(T) string) error {
	if asJSON {
		if items == nil {
			items = []T{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(items)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, it := range items {
		fmt.Fprintln(tw, row(it))
	}
	return tw.Flush()
}
