package ledger

import (
	"errors"
	"testing"
)

// SetHeapLimit sets SQLite's process-wide soft heap limit: a connection
// opened later reads it back; 0 removes it; a negative one is refused.
func TestSetHeapLimitIsTheEnginesAndProcessWide(t *testing.T) {
	read := func() int64 {
		n, err := HeapLimit()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	t.Cleanup(func() { SetHeapLimit(0) }) //nolint:errcheck // the default again
	if err := SetHeapLimit(8 << 20); err != nil || read() != 8<<20 {
		t.Fatalf("after SetHeapLimit(8 MiB): %d, %v", read(), err)
	}
	if err := SetHeapLimit(0); err != nil || read() != 0 {
		t.Fatalf("after SetHeapLimit(0): %d, %v", read(), err)
	}
	if err := SetHeapLimit(-1); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("SetHeapLimit(-1): %v, want ErrInvalidConfig", err)
	}
}
