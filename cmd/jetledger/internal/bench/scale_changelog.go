package bench

import (
	"context"
	"errors"
	"fmt"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// ledgerRun is one jetledger step of the scale run: tag names its durables
// and ledger files apart from the other steps', and logs, if set, are the
// partitions' changelogs, one per ledger.
type ledgerRun struct {
	tag  string
	logs []*changelog.Log
}

func (r ledgerRun) durable(i int) string { return fmt.Sprintf("jetledger%s-p%d", r.tag, i) }

// open opens partition i's ledger at path; with a changelog, the ledger,
// fresh like its log, takes the log over, so that it may write, before
// the clock starts.
func (r ledgerRun) open(ctx context.Context, cfg Config, i int, path string) (*ledger.Store, ledger.Handler, error) {
	if r.logs == nil {
		return openLedger(ctx, cfg, path, nil)
	}
	log := r.logs[i]
	st, h, err := openLedger(ctx, cfg, path, log)
	if err != nil {
		return nil, nil, err
	}
	if err := st.TakeOver(ctx, log.Instance(), fmt.Sprintf("bench-p%d", i), 0, 0); err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, h, nil
}

// changelogLoops is step (c_N+cl): ledgerLoops on fresh durables and
// ledgers, each ledger with its partition's changelog, R3, created on the
// partition's own client as `run --partition I --changelog` would. It
// sets the row's changelog figures; the changelogs are deleted after.
func changelogLoops(ctx context.Context, cfg Config, row *ScaleRow, js []jetstream.JetStream, stream string, counts []int) (err error) {
	n := len(js)
	run := ledgerRun{tag: "-cl", logs: make([]*changelog.Log, n)}
	names := make([]string, n)
	for i := range n {
		run.logs[i], err = changelog.Ensure(ctx, js[i], changelog.Config{Stream: stream, Durable: run.durable(i), Replicas: scaleNodes, Logger: quiet})
		if err != nil {
			return fmt.Errorf("partition %d: %w", i, err)
		}
		names[i], _ = changelog.Names(stream, run.durable(i))
		defer func() {
			// The next rows' changelogs are better given the disk.
			err = errors.Join(err, js[i].DeleteStream(context.WithoutCancel(ctx), names[i]))
		}()
	}
	cl, err := ledgerLoops(ctx, cfg, js, stream, counts, run)
	if err != nil {
		return err
	}
	m := cfg.ScaleMessages
	row.ChangelogPerSec = cl.rate(m)
	row.RatioChangelog = row.ChangelogPerSec / row.LedgerPerSec
	for i := range n {
		row.PartitionResults[i].ChangelogPerSec = cl.partRate(i)
		row.PartitionResults[i].ChangelogLedger = cl.ledgers[i]
		row.PartitionResults[i].ChangelogBatchMs, row.PartitionResults[i].ChangelogDurableMs = cl.batchMs(i)
	}
	var bytes uint64
	for i, name := range names {
		s, err := js[i].Stream(ctx, name)
		if err != nil {
			return fmt.Errorf("changelog %s: %w", name, err)
		}
		bytes += s.CachedInfo().State.Bytes
	}
	row.ChangelogBytesPerMsg = float64(bytes) / float64(m)
	if cfg.onChangelog != nil {
		return cfg.onChangelog(ctx, run.logs)
	}
	return nil
}
