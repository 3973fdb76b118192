package main

import (
	"context"
	"os"

	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/sqlhandler"
)

// newEventsHandler makes the built-in handler of run (sqlhandler) from
// --schema (a file) and --apply, with no effects, as service.Start does for
// run; bad SQL is a usage error.
func newEventsHandler(ctx context.Context, st *ledger.Store, schemaFile, apply string) (*sqlhandler.Handler, error) {
	cfg, err := handlerConfig(schemaFile, apply)
	if err != nil {
		return nil, err
	}
	h, err := sqlhandler.New(ctx, st, cfg)
	return h, sqlUsage(err)
}

// handlerConfig reads the --schema file, if any.
func handlerConfig(schemaFile, apply string) (sqlhandler.Config, error) {
	cfg := sqlhandler.Config{SchemaName: schemaFile, Apply: apply, Names: sqlNames}
	if schemaFile != "" {
		b, err := os.ReadFile(schemaFile)
		if err != nil {
			return cfg, usagef("--schema: %v", err)
		}
		cfg.Schema = string(b)
	}
	return cfg, nil
}
