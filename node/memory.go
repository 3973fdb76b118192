package node

import (
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// What a memory limit does. The Go runtime manages everything but the
// binary's code and SQLite's own allocations (modernc's libc maps them
// outside the Go heap), so the Go memory limit is the whole limit less a
// reserve for those; the embedded server's block caches and id map are Go
// heap and are bounded by it. The one part that grows with the message
// rate rather than with a cache is the server's map of message ids in the
// duplicate window (about 100 B each), so a stream made under a limit gets
// a window just above a publisher's retry horizon instead of NATS's 2m
// (DuplicateWindow).
const (
	// MemoryReserve is what the process holds outside the Go runtime: about
	// 26 MiB of resident code (file-backed), SQLite's heap (its page caches
	// and the WAL index: 3-5 MiB at the edge's rates, bounded by a caller
	// that sets SQLiteHeapLimit before it opens ledgers), and a margin. At 32 MiB a
	// 96 MiB limit ran at 92-95 MiB of RSS: the Go runtime sits at its limit
	// under load, so the reserve is all the room there is.
	MemoryReserve ByteSize = 44 << 20
	// SQLiteHeapLimit is the bound on SQLite's heap under a memory limit
	// (ledger.SetHeapLimit; the service sets it): a ledger opened after it
	// keeps its writer's page cache to a quarter of it (2 MiB), not the
	// 32 MiB it has without a limit.
	SQLiteHeapLimit ByteSize = 8 << 20
	// MemoryLimitMin leaves the Go runtime at least 36 MiB; below that the
	// server's two 8 MiB block buffers and the id map leave the collector
	// nothing to work with and it runs without pause.
	MemoryLimitMin = MemoryReserve + 36<<20
	// LimitedDuplicateWindow is the duplicate window of a stream made under
	// a memory limit: above jetledger publish's retry horizon (28.75 s with
	// its defaults), so its retries are still caught by the server; a later
	// retry is a duplicate the ledger catches.
	LimitedDuplicateWindow = 30 * time.Second
	// DefaultDuplicateWindow is NATS's default.
	DefaultDuplicateWindow = 2 * time.Minute
)

// ByteSize is a size in bytes, written as a number with an optional unit:
// 96MiB, 100MB, 1GiB, 65536.
type ByteSize int64

var byteUnits = []struct {
	suffix string
	factor int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30},
	{"kb", 1000}, {"mb", 1000 * 1000}, {"gb", 1000 * 1000 * 1000},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"b", 1},
}

// ParseByteSize reads a size such as 96MiB (case does not matter; k, m and
// g are KiB, MiB and GiB; a plain number is bytes).
func ParseByteSize(s string) (ByteSize, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	factor := int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(v, u.suffix) {
			v, factor = strings.TrimSpace(strings.TrimSuffix(v, u.suffix)), u.factor
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/factor {
		return 0, fmt.Errorf("%q: want a size such as 96MiB, 100MB or a number of bytes", s)
	}
	return ByteSize(n * factor), nil
}

func (b ByteSize) String() string {
	switch {
	case b%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", b>>20)
	case b%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", b>>10)
	}
	return strconv.FormatInt(int64(b), 10)
}

// CheckMemoryLimit refuses a limit the process cannot live within (0 is
// no limit).
func CheckMemoryLimit(limit ByteSize) error {
	if limit != 0 && limit < MemoryLimitMin {
		return fmt.Errorf("%w: %s, want at least %s (about %s is code and SQLite outside the Go runtime)",
			ErrMemoryLimit, limit, MemoryLimitMin, MemoryReserve)
	}
	return nil
}

// ApplyMemoryLimit sets the process's Go memory limit to limit less
// MemoryReserve (0: leaves it, so GOMEMLIMIT still works). The limit is the
// process's, not a node's: Start applies Config.MemoryLimit, and a program
// without a node (its NATS server elsewhere) may call this itself. The
// reserve counts on SQLite's heap staying within SQLiteHeapLimit: a program
// that opens ledgers calls ledger.SetHeapLimit(int64(SQLiteHeapLimit)) too
// (the service does).
func ApplyMemoryLimit(limit ByteSize, log *slog.Logger) error {
	if err := CheckMemoryLimit(limit); err != nil || limit == 0 {
		return err
	}
	goLimit := limit - MemoryReserve
	debug.SetMemoryLimit(int64(goLimit))
	if log == nil {
		log = slog.Default()
	}
	log.Info("memory limit set", "limit", limit, "go_limit", goLimit)
	return nil
}

// DuplicateWindow is the window to give a stream: given when positive,
// else NATS's default, or LimitedDuplicateWindow under a memory limit.
func DuplicateWindow(given time.Duration, memoryLimit ByteSize) time.Duration {
	switch {
	case given > 0:
		return given
	case memoryLimit > 0:
		return LimitedDuplicateWindow
	default:
		return DefaultDuplicateWindow
	}
}
