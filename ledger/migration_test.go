package ledger

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// databaseAt makes a database as a release at schema version n left it:
// the first n migrations, user_version n. The caller adds rows and closes it.
func databaseAt(t *testing.T, n int) (string, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), fmt.Sprintf("v%d.db", n))
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[:n] {
		if _, err := raw.Exec(m.sql); err != nil {
			t.Fatal(m.name, err)
		}
	}
	if _, err := raw.Exec(fmt.Sprintf("PRAGMA user_version = %d", n)); err != nil {
		t.Fatal(err)
	}
	return path, raw
}

// Migration 0004 starts last_seq from what a version-3 database knows of
// later copies: every conflict it recorded is one, with its sequence. Prune
// must keep the row while that copy is in the stream, so a replay meets it
// as a conflict again, never applies it.
func TestMigration0004KeepsRecordedConflicts(t *testing.T) {
	t.Parallel()
	path, raw := databaseAt(t, 3)
	applied := time.Now().Add(-30 * 24 * time.Hour)
	a, b := sha256.Sum256([]byte("pay 5")), sha256.Sum256([]byte("pay 500"))
	if _, err := raw.Exec(`INSERT INTO processed_messages VALUES ('evt-1', 'S', 1, 'ev', ?1, ?3);
		INSERT INTO conflicts (message_id, stream, stream_seq, subject, existing_sha256, new_sha256, payload, seen_at)
			VALUES ('evt-1', 'S', 5, 'ev', ?1, ?2, 'pay 500', ?3)`, a[:], b[:], applied.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	raw.Close()

	st, err := Open(path, Config{}) // upgrades to version 4
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	// The stream has dropped seq 1; the conflicting copy at seq 5 remains.
	if _, err := st.Prune(ctx, PruneOptions{Stream: "S", FirstSeq: 2, DuplicateWindow: time.Minute}); err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context, *Tx, Delivery) error { return nil }
	rs, err := st.ApplyBatch(ctx, []Delivery{{MessageID: "evt-1", Stream: "S", Sequence: 5, Subject: "ev", Data: []byte("pay 500")}}, noop, Budget{})
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Outcome != Conflict {
		t.Fatalf("replayed copy at seq 5 (a recorded conflict, still in the stream): %v, want conflict", rs[0].Outcome)
	}
}
