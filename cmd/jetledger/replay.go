package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/ledger"
	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"
)

const replayHelp = `
Replay a stream through the ledger to rebuild state, on a new host or after
restoring a backup: from --from-seq N, from --since (a duration such as 24h or
an RFC 3339 time), or from the start of the stream, to its end. It takes the
same path as 'run': a message already in the ledger is a duplicate and does
nothing; a new one is applied with --apply in the same transaction.

Outbox effects of replayed messages are suppressed by default: with --webhook
the rows are recorded as 'suppressed' and nothing is sent, so rebuilding a host
never re-sends an email or a webhook. --send-effects sends them.

It uses a temporary consumer, so the durable of 'run' is not moved. A progress
bar shows on a terminal, progress lines otherwise, and a summary at the end:
applied, duplicates, conflicts, suppressed, dead letters.`

func replayCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return consume(ctx, args, stdout, stderr, true)
}

// replayFrom reads --from-seq and --since.
func (f *runFlags) replayFrom() (consumer.ReplayFrom, error) {
	if f.fromSeq > 0 && f.since != "" {
		return consumer.ReplayFrom{}, usagef("give --from-seq or --since, not both")
	}
	if f.since == "" {
		return consumer.ReplayFrom{Seq: f.fromSeq}, nil
	}
	if d, err := time.ParseDuration(f.since); err == nil {
		if d <= 0 {
			return consumer.ReplayFrom{}, usagef("--since %q: want a positive duration", f.since)
		}
		return consumer.ReplayFrom{Time: time.Now().Add(-d)}, nil
	}
	t, err := time.Parse(time.RFC3339, f.since)
	if err != nil {
		return consumer.ReplayFrom{}, usagef("--since %q: want a duration (24h) or an RFC 3339 time (2026-11-30T00:00:00Z)", f.since)
	}
	return consumer.ReplayFrom{Time: t}, nil
}

// followReplay shows progress and calls done once the replay consumer has
// nothing pending and nothing unacked: the end of the stream is reached.
func followReplay(ctx context.Context, c *consumer.Consumer, out io.Writer, done func()) error {
	var bar *progressbar.ProgressBar
	if f, ok := out.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		bar = progressbar.NewOptions64(-1, progressbar.OptionSetWriter(out), progressbar.OptionSetDescription("replaying"),
			progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("msg"),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
	}
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	lastLine := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		info, err := c.Info(ctx)
		if err != nil {
			continue // a transient error: the next tick asks again
		}
		n := c.Counts()
		handled := int64(n.Applied + n.Duplicates + n.Conflicts + n.DeadLetters)
		total := handled + int64(info.NumPending) + int64(info.NumAckPending)
		if bar != nil {
			bar.ChangeMax64(total)
			bar.Set64(handled) //nolint:errcheck // drawing only
		} else if time.Since(lastLine) >= 5*time.Second {
			fmt.Fprintf(out, "replayed %d of %d\n", handled, total)
			lastLine = time.Now()
		}
		if info.NumPending == 0 && info.NumAckPending == 0 {
			if bar != nil {
				bar.Finish() //nolint:errcheck // drawing only
			}
			done()
			return nil
		}
	}
}

type replayResult struct {
	Applied     uint64  `json:"applied"`
	Duplicates  uint64  `json:"duplicates"`
	Conflicts   uint64  `json:"conflicts"`
	Suppressed  int64   `json:"suppressed"`
	DeadLetters uint64  `json:"dead_letters"`
	Seconds     float64 `json:"seconds"`
}

func replaySummary(ctx context.Context, st *ledger.Store, c *consumer.Consumer, started time.Time, asJSON bool, out io.Writer) error {
	n := c.Counts()
	res := replayResult{Applied: n.Applied, Duplicates: n.Duplicates, Conflicts: n.Conflicts, DeadLetters: n.DeadLetters,
		Seconds: time.Since(started).Seconds()}
	suppressed, err := st.CountOutbox(ctx, ledger.StatusSuppressed, started)
	if err != nil {
		return err
	}
	res.Suppressed = suppressed
	if asJSON {
		return json.NewEncoder(out).Encode(res)
	}
	fmt.Fprintf(out, "replay done in %.1fs: %d applied, %d duplicates, %d conflicts, %d effects suppressed, %d dead letters\n",
		res.Seconds, res.Applied, res.Duplicates, res.Conflicts, res.Suppressed, res.DeadLetters)
	return nil
}
