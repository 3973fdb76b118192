package ledger

import (
	"database/sql"
	"fmt"
)

// SetHeapLimit bounds SQLite's own memory, in this process and for every
// database it has open (SQLite's soft heap limit): past it SQLite reuses
// the page caches' least recent pages instead of growing them, so a ledger
// that grows, and readers that touch more of it, do not grow the process.
// A limit is soft: a statement that needs more still gets it. 0 removes
// the limit. Under a memory limit, SQLite's heap is part of what the Go
// runtime does not manage (node.MemoryReserve); it is a few MiB at the
// edge's rates, and its caches would grow with the database without this.
func SetHeapLimit(bytes int64) error {
	if bytes < 0 {
		return fmt.Errorf("%w: SQLite heap limit %d: want 0 (none) or more", ErrInvalidConfig, bytes)
	}
	// The limit is the engine's, process-wide; any connection sets it.
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		return err
	}
	defer db.Close()
	// PRAGMA takes no bound parameters; bytes is our own integer.
	if _, err := db.Exec(fmt.Sprintf("PRAGMA soft_heap_limit = %d", bytes)); err != nil {
		return fmt.Errorf("ledger: set SQLite's heap limit: %w", err)
	}
	return nil
}

// HeapLimit is SQLite's soft heap limit in this process (0: none).
func HeapLimit() (int64, error) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n int64
	err = db.QueryRow("PRAGMA soft_heap_limit").Scan(&n)
	return n, err
}
