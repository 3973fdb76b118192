package sqlhandler

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// checkBudget bounds the early check: a Schema that loads data runs
// twice (here, then on the ledger), and past this the check gives up rather
// than double a long start.
const checkBudget = 2 * time.Second

// Check runs cfg.Schema and checks cfg.Apply on a scratch ledger that
// holds a copy of the real ledger's schema, before any server, store,
// database or stream exists: a bad Schema or Apply is refused with nothing
// created, even where something else would have failed first (a port in
// use). The real ledger is checked again once it is open (New),
// so wherever the scratch copy cannot tell, this check steps aside rather
// than guess: the copy cannot be made, the schema writes outside the ledger
// file (ATTACH, VACUUM INTO: it would write there twice), a statement fails
// on a constraint (it may depend on rows the copy lacks), or the check takes
// longer than checkBudget. db is the ledger file's path (it need not
// exist; it is only read). Only a *CheckError or ctx's error is returned;
// cfg.Effect is not used.
func Check(ctx context.Context, db string, cfg Config) error {
	schema, apply := cfg.Schema, cfg.Apply
	if schema == "" && apply == "" {
		return nil
	}
	if writesElsewhere(schema) {
		return nil
	}
	dir, err := os.MkdirTemp("", "jetledger-sqlcheck-")
	if err != nil {
		return nil
	}
	defer os.RemoveAll(dir)
	st, err := ledger.Open(filepath.Join(dir, "check.db"), ledger.Config{Logger: slog.New(slog.DiscardHandler), CheckpointInterval: time.Hour})
	if err != nil {
		return nil
	}
	defer st.Close()
	cctx, cancel := context.WithTimeout(ctx, checkBudget)
	defer cancel()
	if !copySchema(cctx, db, st) {
		return ctx.Err()
	}
	if schema != "" {
		if _, err := st.Exec(cctx, schema); err != nil {
			if ctx.Err() != nil || cctx.Err() != nil || errors.Is(err, ledger.ErrConstraint) || databaseCondition(err) {
				// A constraint may fail for want of the rows the copy lacks; the
				// scratch disk may fail it: the copy cannot tell.
				return ctx.Err()
			}
			return schemaError(cfg, err)
		}
	}
	_, err = New(cctx, st, Config{Apply: apply, Names: cfg.Names, Logger: slog.New(slog.DiscardHandler)}) // a move of the copy is not news
	if ctx.Err() != nil || !errors.As(err, new(*CheckError)) {
		return ctx.Err()
	}
	return err
}

// writesElsewhere reports whether a statement of schema starts with ATTACH
// or VACUUM, which could write a file other than the ledger.
func writesElsewhere(schema string) bool {
	for _, stmt := range sqlStatements(schema) {
		for i := 0; i < len(stmt); {
			n, _ := sqlToken(stmt[i:])
			tok := stmt[i : i+n]
			i += n
			if isSQLSpace(tok[0]) || strings.HasPrefix(tok, "--") || strings.HasPrefix(tok, "/*") {
				continue // space and comments before the first keyword
			}
			if kw := strings.ToUpper(tok); kw == "ATTACH" || kw == "VACUUM" {
				return true
			}
			break
		}
	}
	return false
}

// copySchema recreates in to, in their order of creation, the tables,
// indexes, views and triggers of the ledger file db that to lacks (the
// ledger's own it has already, and a virtual table's shadow tables come
// with it). A missing db has nothing to copy. It
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
	rows, err := src.QueryContext(ctx, `SELECT name, sql FROM sqlite_schema WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY rowid`)
	if err != nil {
		return false
	}
	defer rows.Close()
	type object struct{ name, sql string }
	var objs []object
	for rows.Next() {
		var o object
		if rows.Scan(&o.name, &o.sql) != nil {
			return false
		}
		objs = append(objs, o)
	}
	if rows.Err() != nil {
		return false
	}
	for _, o := range objs {
		// Asked again each time: a virtual table made its shadow tables.
		var n int
		if err := to.DB().QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE name = ?`, o.name).Scan(&n); err != nil {
			return false
		}
		if n > 0 {
			continue
		}
		if _, err := to.Exec(ctx, o.sql); err != nil {
			return false
		}
	}
	return true
}
