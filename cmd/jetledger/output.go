package main

import (
	"encoding/json"
	"io"

	"github.com/jetledger/jetledger/internal/table"
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
// prints the rows fetch reads from the ledger of db (table.Print).
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
		return table.Print(inv.stdout, asJSON, items, header, row)
	})
}
