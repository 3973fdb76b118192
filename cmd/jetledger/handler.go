package main

import (
	"context"
	"errors"
	"os"

	"github.com/jetledger/jetledger/internal/say"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/sqlhandler"
)

// sqlNames are what the built-in handler's errors call its settings: the
// flags (sqlhandler.Config.Names).
var sqlNames = say.Under(runNames.Settings, "SQL")

// newEventsHandler makes the built-in handler of run (sqlhandler) from
// --schema (a file) and --apply, with no effects; bad SQL is a usage error.
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

// sqlUsage is err a usage error (exit 2) if it is bad SQL: a
// *sqlhandler.CheckError. Anything else (the ledger's condition, a stop)
// stays a runtime error.
func sqlUsage(err error) error {
	if errors.As(err, new(*sqlhandler.CheckError)) {
		return usageError{err}
	}
	return err
}
