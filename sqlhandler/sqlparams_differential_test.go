package sqlhandler

import (
	"context"
	"database/sql"
	"strings"
	"testing"
)

// FuzzApplyParamsAgainstSQLite is a differential fuzz of the --apply
// start-up check (issue 9 point 11): whenever SQL compiles and
// checkApplyParams accepts it, binding the handler's four named arguments
// must never fail with a missing argument (that is the run-time failure that
// dead-letters every message).
func FuzzApplyParamsAgainstSQLite(f *testing.F) {
	for _, s := range []string{
		"SELECT :data", "SELECT 1 -- :x\n, :data", "SELECT '::' || :data", "SELECT $data::x",
		"SELECT :data /* :x */", "SELECT [a:b], :seq", "SELECT \"x:y\", @msg_id", "SELECT #data",
		"SELECT x'00' || :data", "SELECT 1e5, :data", "SELECT 0x1f, :subject", "SELECT :data(x)",
	} {
		f.Add(s)
	}
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		f.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	f.Cleanup(func() { db.Close() })
	f.Fuzz(func(t *testing.T, q string) {
		if !strings.HasPrefix(strings.TrimSpace(strings.ToUpper(q)), "SELECT") || strings.Contains(q, ";") {
			return
		}
		if checkApplyParams(q, "") != nil {
			return
		}
		ctx := context.Background()
		rows, err := db.QueryContext(ctx, q, sql.Named("msg_id", "m"), sql.Named("subject", "s"),
			sql.Named("seq", int64(1)), sql.Named("data", `{}`))
		if err != nil {
			if strings.Contains(err.Error(), "missing") && strings.Contains(err.Error(), "argument") {
				t.Fatalf("%q passed the start-up check but fails at run time: %v (params seen: %q)", q, err, sqlParams(q))
			}
			return
		}
		rows.Close()
	})
}
