package ledger

import (
	"database/sql"
	"fmt"
)

// SetHeapLimit bounds SQLite's own memory in this process. It sets
// SQLite's soft heap limit, which this build of SQLite does not enforce:
// modernc.org/sqlite is compiled without memory statistics
// (SQLITE_DEFAULT_MEMSTATUS=0), and the limit needs them. So the bound
// that holds is the page cache: every store opened after it gives its
// writer a page cache of a quarter of the limit at most (writerCache). Readers keep
// SQLite's default 2 MiB each. 0 removes the limit. Under a memory limit,
// SQLite's heap is part of what the Go runtime does not manage
// (node.MemoryReserve).
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
