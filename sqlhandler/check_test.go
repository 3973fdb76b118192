package sqlhandler

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/jetledger/jetledger/ledger"
)

// Check sees the tables the ledger file already has, and creates nothing
// in it: an Apply on a table an earlier Schema made passes, one on a table
// it lacks is a *CheckError (ErrApplyInvalid), as is a bad Schema
// (ErrSchema); a ledger file that does not exist is not created.
func TestCheckSeesTheLedgersTables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "l.db")
	if err := Check(ctx, db, Config{Apply: "INSERT INTO nowhere VALUES (:data)"}); !errors.Is(err, ErrApplyInvalid) {
		t.Fatalf("Apply on a table nothing makes: %v, want ErrApplyInvalid", err)
	}
	if err := Check(ctx, db, Config{Schema: demoSchema, Apply: demoApply}); err != nil {
		t.Fatalf("Schema then Apply on no ledger file yet: %v", err)
	}
	var check *CheckError
	if err := Check(ctx, db, Config{Schema: "CREATE TABL x (y)", SchemaName: "s.sql"}); !errors.As(err, &check) || !errors.Is(err, ErrSchema) {
		t.Fatalf("bad Schema: %v, want a *CheckError (ErrSchema)", err)
	}
	if _, err := os.Stat(db); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Check made the ledger file: %v", err)
	}
	st, err := ledger.Open(db, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Exec(ctx, demoSchema); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := Check(ctx, db, Config{Apply: demoApply}); err != nil {
		t.Fatalf("Apply on a table the ledger has: %v", err)
	}
	if err := Check(ctx, db, Config{Apply: "INSERT INTO nowhere VALUES (:data)"}); !errors.Is(err, ErrApplyInvalid) {
		t.Fatalf("Apply on a table the ledger lacks: %v, want ErrApplyInvalid", err)
	}
}

// A schema that attaches another file is left to the ledger, however it is
// written: the early check would write that file a second time.
func TestWritesElsewhereSeesPastComments(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		schema string
		want   bool
	}{
		{"ATTACH DATABASE 'a.db' AS a;", true},
		{"-- audit\n  /* its own file */ attach 'a.db' AS a;", true},
		{"CREATE TABLE t (x);\nVACUUM INTO 'copy.db';", true},
		{"CREATE TABLE attach_log (x); -- ATTACH is only a word here", false},
		{"INSERT INTO t VALUES ('ATTACH');", false},
	} {
		if got := writesElsewhere(tt.schema); got != tt.want {
			t.Errorf("writesElsewhere(%q) = %v, want %v", tt.schema, got, tt.want)
		}
	}
}
