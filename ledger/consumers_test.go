package ledger

import (
	"context"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// A pair is recorded once, however often run starts with it: its first
// sighting stays, its last moves. Another pair adds a row, listed first as
// the one seen last; both outlive the process.
func TestRememberConsumer(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "l.db")
	var clock atomic.Int64
	clock.Store(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixMilli())
	now := func() time.Time { return time.UnixMilli(clock.Load()) }
	st, err := Open(path, Config{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if cs, err := st.Consumers(ctx); err != nil || len(cs) != 0 {
		t.Fatalf("a new ledger: %+v, %v; want none", cs, err)
	}
	first := now()
	if err := st.RememberConsumer(ctx, "PAYMENTS", "jetledger", ""); err != nil {
		t.Fatal(err)
	}
	clock.Add(time.Hour.Milliseconds())
	if err := st.RememberConsumer(ctx, "PAYMENTS", "jetledger", ""); err != nil {
		t.Fatal(err)
	}
	cs, err := st.Consumers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []Consumer{{Stream: "PAYMENTS", Durable: "jetledger", FirstSeen: first, LastSeen: now()}}
	if !slices.EqualFunc(cs, want, sameConsumer) {
		t.Fatalf("after two starts: %+v, want %+v", cs, want)
	}
	clock.Add(time.Hour.Milliseconds())
	if err := st.RememberConsumer(ctx, "ORDERS", "jetledger", ""); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][2]string{{"", "d"}, {"S", ""}} {
		if err := st.RememberConsumer(ctx, bad[0], bad[1], ""); err == nil {
			t.Fatalf("RememberConsumer(%q, %q) recorded an empty name", bad[0], bad[1])
		}
	}
	st.Close()

	st, err = Open(path, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cs, err = st.Consumers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want = append([]Consumer{{Stream: "ORDERS", Durable: "jetledger", FirstSeen: now(), LastSeen: now()}}, want...)
	if !slices.EqualFunc(cs, want, sameConsumer) {
		t.Fatalf("reopened: %+v, want %+v", cs, want)
	}
}

func sameConsumer(a, b Consumer) bool {
	return a.Stream == b.Stream && a.Durable == b.Durable && a.FirstSeen.Equal(b.FirstSeen) && a.LastSeen.Equal(b.LastSeen)
}

// Migration 0006 adds the table to a version-5 database, whose handler may
// well have a table of its own called consumers: that one is left alone.
func TestMigration0006KeepsAHandlersConsumersTable(t *testing.T) {
	t.Parallel()
	path, raw := databaseAt(t, 5)
	if _, err := raw.Exec(`CREATE TABLE consumers (name TEXT PRIMARY KEY);
		INSERT INTO consumers VALUES ('a customer')`); err != nil {
		t.Fatal(err)
	}
	raw.Close()

	st, err := Open(path, Config{}) // upgrades to version 6
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	if err := st.RememberConsumer(ctx, "S", "d", ""); err != nil {
		t.Fatal(err)
	}
	cs, err := st.Consumers(ctx)
	if err != nil || len(cs) != 1 || cs[0].Stream != "S" || cs[0].Durable != "d" {
		t.Fatalf("after the upgrade: %+v, %v", cs, err)
	}
	var name string
	if err := st.reader.QueryRow(`SELECT name FROM consumers`).Scan(&name); err != nil || name != "a customer" {
		t.Fatalf("the handler's consumers table: %q, %v", name, err)
	}
}

// The stream instance is the last one named: a start that names none keeps
// it, a start on another instance replaces it.
func TestRememberConsumerKeepsTheLastInstance(t *testing.T) {
	t.Parallel()
	st, err := Open(filepath.Join(t.TempDir(), "l.db"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	for _, step := range []struct{ give, want string }{
		{"", ""}, {"PAY@1", "PAY@1"}, {"", "PAY@1"}, {"PAY@2", "PAY@2"},
	} {
		if err := st.RememberConsumer(ctx, "PAY", "jetledger", step.give); err != nil {
			t.Fatal(err)
		}
		cs, err := st.Consumers(ctx)
		if err != nil || len(cs) != 1 || cs[0].StreamInstance != step.want {
			t.Fatalf("after naming %q: %+v, %v; want instance %q", step.give, cs, err, step.want)
		}
	}
}
