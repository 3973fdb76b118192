package main

import (
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kong"
)

// What --memory-limit does. The Go runtime manages everything but the
// binary's code and SQLite's own allocations (modernc's libc maps them
// outside the Go heap), so the Go memory limit is the whole limit less a
// reserve for those; the embedded server's block caches and id map are Go
// heap and are bounded by it. The one part that grows with the message
// rate rather than with a cache is the server's map of message ids in the
// duplicate window (about 100 B each), so a stream run creates gets a
// window just above a publisher's retry horizon instead of NATS's 2m.
const (
	// memoryReserve is what the process holds outside the Go runtime:
	// measured as RSS less the runtime's own (sys less released) while
	// jetledger publish feeds run, 25-30 MiB: about 25 MiB of resident code
	// (file-backed), the rest SQLite's page caches and the WAL index.
	memoryReserve = 32 << 20
	// memoryLimitMin leaves the Go runtime at least 36 MiB; below that the
	// server's two 8 MiB block buffers and the id map leave the collector
	// nothing to work with and it runs without pause.
	memoryLimitMin = memoryReserve + 36<<20
	// limitedDuplicateWindow is the duplicate window of a stream run
	// creates under --memory-limit: above jetledger publish's retry horizon
	// (28.75 s with its defaults), so its retries are still caught by the
	// server; a later retry is a duplicate the ledger catches.
	limitedDuplicateWindow = 30 * time.Second
	// defaultDuplicateWindow is NATS's default.
	defaultDuplicateWindow = 2 * time.Minute
)

// byteSize is a flag value in bytes, written as a number with an optional
// unit: 96MiB, 100MB, 1GiB, 65536.
type byteSize int64

var byteUnits = []struct {
	suffix string
	factor int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30},
	{"kb", 1000}, {"mb", 1000 * 1000}, {"gb", 1000 * 1000 * 1000},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"b", 1},
}

// parseByteSize reads a size such as 96MiB.
func parseByteSize(s string) (byteSize, error) {
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
	return byteSize(n * factor), nil
}

// Decode reads the flag's value for kong.
func (b *byteSize) Decode(ctx *kong.DecodeContext) error {
	v, err := popFlagValue(ctx, "size")
	if err != nil {
		return err
	}
	n, err := parseByteSize(v)
	if err != nil {
		return err
	}
	*b = n
	return nil
}

func (b byteSize) String() string {
	switch {
	case b%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", b>>20)
	case b%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", b>>10)
	}
	return strconv.FormatInt(int64(b), 10)
}

// checkMemoryLimit refuses a limit the process cannot live within.
func checkMemoryLimit(limit byteSize) error {
	if limit != 0 && limit < memoryLimitMin {
		return usagef("--memory-limit %s: want at least %s (about %s is code and SQLite outside the Go runtime, and the embedded server needs the rest)",
			limit, byteSize(memoryLimitMin), byteSize(memoryReserve))
	}
	return nil
}

// applyMemoryLimit sets the Go memory limit for --memory-limit (0: leave
// it, so GOMEMLIMIT still works).
func applyMemoryLimit(limit byteSize, log *slog.Logger) {
	if limit == 0 {
		return
	}
	goLimit := int64(limit) - memoryReserve
	debug.SetMemoryLimit(goLimit)
	log.Info("memory limit set", "limit", limit, "go_limit", byteSize(goLimit))
}

// duplicateWindow is the window of a stream run creates: --duplicate-window
// when given, else NATS's default, or a short one under --memory-limit.
func duplicateWindow(given time.Duration, limit byteSize) time.Duration {
	switch {
	case given > 0:
		return given
	case limit > 0:
		return limitedDuplicateWindow
	default:
		return defaultDuplicateWindow
	}
}

// flag is the size as a flag value; empty for 0.
func (b byteSize) flag() string {
	if b == 0 {
		return ""
	}
	return b.String()
}
