package partition

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

var mapping = regexp.MustCompile(`^\{\{\s*partition\(\s*(\d+)\s*,`)

// Count reads how many partitions a stream was created with, from its
// subject mapping ({{partition(N,…)}} first); 0 when it is not
// partitioned.
func Count(cfg jetstream.StreamConfig) int {
	if cfg.SubjectTransform == nil {
		return 0
	}
	m := mapping.FindStringSubmatch(cfg.SubjectTransform.Destination)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// Ledger is partition i's ledger beside db: -p<i> before the extension
// (ledger.db: ledger-p0.db).
func Ledger(db string, i int) string {
	ext := filepath.Ext(db)
	return fmt.Sprintf("%s-p%d%s", strings.TrimSuffix(db, ext), i, ext)
}

// Durable is partition i's durable: <durable>-p<i>.
func Durable(durable string, i int) string { return fmt.Sprintf("%s-p%d", durable, i) }

// Filter is the subjects of partition i: the mapping puts the partition
// number first.
func Filter(i int) string { return strconv.Itoa(i) + ".>" }

// Here is the partitions to consume: those named, in order, or else all n
// of the stream (none when n is 0).
func Here(named []int, n int) []int {
	if len(named) > 0 {
		return slices.Sorted(slices.Values(named))
	}
	var all []int
	for i := range n {
		all = append(all, i)
	}
	return all
}

var durableName = regexp.MustCompile(`^.*-p(\d+)$`)

// OfDurable is the partition whose durable (Durable) durable is, among n:
// false when it is not a partition's durable, or of a partition the stream
// does not have. A consumer of a partitioned stream without a filter takes
// its partition's from it (as a replay of a partition's ledger reads it),
// so a ledger never gets every partition.
func OfDurable(durable string, n int) (int, bool) {
	m := durableName.FindStringSubmatch(durable)
	if m == nil {
		return 0, false
	}
	i, err := strconv.Atoi(m[1])
	return i, err == nil && i < n
}
