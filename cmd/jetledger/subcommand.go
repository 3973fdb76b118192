package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

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
