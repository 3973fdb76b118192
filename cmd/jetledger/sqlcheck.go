package main

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// checkSQLFirst runs --schema and checks --apply on a scratch ledger that
// holds a copy of the real ledger's schema, before any server, store,
// database or stream exists: a bad --schema or --apply exits 2 with nothing
// created, even where something else would have failed first (a port in
// use). The real ledger is checked again once it is open (newEventsHandler),
// so where the copy cannot be made this check is skipped, never guessed:
// only a usage error or a stop is returned from here.
func checkSQLFirst(ctx context.Context, db, schemaFile, apply string) error {
	if schemaFile == "" && apply == "" {
		return nil
	}
	dir, err := os.MkdirTemp("", "jetledger-sqlcheck-")
	if err != nil {
		return nil
	}
	defer os.RemoveAll(dir)
	st, err := ledger.Open(filepath.Join(dir, "check.db"), ledger.Config{Logger: quiet, CheckpointInterval: time.Hour})
	if err != nil {
		return nil
	}
	defer st.Close()
	if !copySchema(ctx, db, st) {
		return ctx.Err()
	}
	_, err = newEventsHandler(ctx, st, schemaFile, apply)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.As(err, new(usageError)) {
		return err
	}
	return nil
}

// copySchema recreates in to, in their order of creation, the tables,
// indexes, views and triggers of the ledger file db that to lacks (the
// ledger's own it has already). A missing db has nothing to copy. It
// reports whether the copy is whole; the file is only read.
func copySchema(ctx context.Context, db string, to *ledger.Store) bool {
	if _, err := os.Stat(db); errors.Is(err, fs.ErrNotExist) {
		return true
	} else if err != nil {
		return false
	}
	src, err := sql.Open("sqlite", "file:"+db+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return false
	}
	defer src.Close()
	have := map[string]bool{}
	if !scanNames(ctx, to.DB(), have) {
		return false
	}
	rows, err := src.QueryContext(ctx, `SELECT name, sql FROM sqlite_schema WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY rowid`)
	if err != nil {
		return false
	}
	defer rows.Close()
	var stmts []string
	for rows.Next() {
		var name, stmt string
		if rows.Scan(&name, &stmt) != nil {
			return false
		}
		if !have[name] {
			stmts = append(stmts, stmt)
		}
	}
	if rows.Err() != nil {
		return false
	}
	for _, stmt := range stmts {
		if _, err := to.Exec(ctx, stmt); err != nil {
			return false
		}
	}
	return true
}

// scanNames adds the names in db's schema to have.
func scanNames(ctx context.Context, db *sql.DB, have map[string]bool) bool {
	rows, err := db.QueryContext(ctx, `SELECT name FROM sqlite_schema`)
	if err != nil {
		return false
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if rows.Scan(&name) != nil {
			return false
		}
		have[name] = true
	}
	return rows.Err() == nil
}
