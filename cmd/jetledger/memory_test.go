package main

import (
	"context"
	"io"
	"math"
	"path/filepath"
	"runtime/debug"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

func TestMemoryLimitUsage(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "l.db")
	for _, args := range [][]string{
		{"run", "--db", db, "--memory-limit", "10MiB"},
		{"run", "--db", db, "--memory-limit", "lots"},
		{"run", "--db", db, "--memory-limit"},
	} {
		if code, _, stderr := runMain(args...); code != exitUsage {
			t.Fatalf("%v: exit %d, want %d; stderr %s", args, code, exitUsage, stderr)
		}
	}
}

// --memory-limit sets the Go memory limit to the limit less the reserve,
// holds SQLite's heap to node.SQLiteHeapLimit, and
// gives a stream run creates a window just above publish's retry horizon;
// the server's own stream config and the runtime are read back. Not
// parallel: the memory limit is the process's.
func TestMemoryLimitApplied(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	tests := []struct {
		args       []string
		wantWindow time.Duration
		wantGo     int64
		wantSQLite int64 // SQLite's soft heap limit
	}{
		{nil, 2 * time.Minute, math.MaxInt64, 0},
		{[]string{"--memory-limit", "96MiB"}, 30 * time.Second, 52 << 20, 8 << 20},
		{[]string{"--memory-limit", "128MiB", "--duplicate-window", "45s"}, 45 * time.Second, 84 << 20, 8 << 20},
	}
	defer ledger.SetHeapLimit(0) //nolint:errcheck // the default again
	for _, tt := range tests {
		debug.SetMemoryLimit(math.MaxInt64)
		if err := ledger.SetHeapLimit(0); err != nil {
			t.Fatal(err)
		}
		args := append([]string{"run", "--db", filepath.Join(t.TempDir(), "l.db"), "--listen", "127.0.0.1:0",
			"--stream", "M", "--subjects", "m.>", "--log-level", "error"}, tt.args...)
		root, err := parseArgs(args...)
		if err != nil {
			t.Fatal(err)
		}
		c, err := root.Run.setup(context.Background(), io.Discard, nil)
		if err != nil {
			t.Fatal(err)
		}
		s, err := c.js.Stream(context.Background(), "M")
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CachedInfo().Config.Duplicates; got != tt.wantWindow {
			t.Errorf("%v: duplicate window %s, want %s", tt.args, got, tt.wantWindow)
		}
		if got := debug.SetMemoryLimit(-1); got != tt.wantGo {
			t.Errorf("%v: Go memory limit %d, want %d", tt.args, got, tt.wantGo)
		}
		if got := sqliteHeapLimit(t); got != tt.wantSQLite {
			t.Errorf("%v: SQLite's soft heap limit %d, want %d", tt.args, got, tt.wantSQLite)
		}
	}
}

func sqliteHeapLimit(t *testing.T) int64 {
	t.Helper()
	n, err := ledger.HeapLimit()
	if err != nil {
		t.Fatal(err)
	}
	return n
}
