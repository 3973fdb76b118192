package ledger

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden schema")

// schemaOf lists every object of the database's schema, one per line.
func schemaOf(tb testing.TB, db *sql.DB) string {
	tb.Helper()
	rows, err := db.Query(`SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_schema ORDER BY type, name`)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var typ, name, tbl, q string
		if err := rows.Scan(&typ, &name, &tbl, &q); err != nil {
			tb.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s on %s\n%s\n\n", typ, name, tbl, q)
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return b.String()
}

// The schema every migration leads to is the golden one (go test -update
// rewrites it after adding a migration); a database made by the released 0001
// before it was edited ends there too.
func TestSchemaIsGolden(t *testing.T) {
	t.Parallel()
	fresh, err := Open(filepath.Join(t.TempDir(), "fresh.db"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	got := schemaOf(t, fresh.reader)
	golden := filepath.Join("testdata", "schema.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("schema differs from %s (run go test ./ledger -run TestSchemaIsGolden -update after adding a migration):\n%s", golden, got)
	}

	// The released 0001 once created an index an edit removed.
	path := filepath.Join(t.TempDir(), "old.db")
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(ms[0].sql + `; CREATE INDEX processed_messages_processed_at ON processed_messages (processed_at); PRAGMA user_version = 1`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	old, err := Open(path, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if got := schemaOf(t, old.reader); got != string(want) {
		t.Fatalf("a database from the released 0001 migrates to another schema:\n%s", got)
	}
}

// Released migrations never change: each file's SHA-256 is in
// migrations/released.sha256, and a new migration adds its line there.
func TestReleasedMigrationsUnchanged(t *testing.T) {
	t.Parallel()
	sums, err := os.ReadFile(filepath.Join("migrations", "released.sha256"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("released.sha256: bad line %q (want \"<sha256>  <file>\")", line)
		}
		want[name] = sum
	}
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		sum := sha256.Sum256([]byte(m.sql))
		switch w, ok := want[m.name]; {
		case !ok:
			t.Errorf("%s is not in migrations/released.sha256: add its line (sha256sum %s)", m.name, m.name)
		case w != hex.EncodeToString(sum[:]):
			t.Errorf("%s changed after its release: add a new migration instead", m.name)
		}
	}
	if len(want) != len(ms) {
		t.Errorf("released.sha256 lists %d migrations, there are %d", len(want), len(ms))
	}
}
