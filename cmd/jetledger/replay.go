package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/ledger"
	"github.com/mattn/go-isatty"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/schollz/progressbar/v3"
)

const replayHelp = `
Replay a stream through the ledger to rebuild state, on a new host or after
restoring a backup: from --from-seq N, from --since (a duration such as 24h or
an RFC 3339 time), or from the start of the stream, up to where run stands:
the ack floor of its durable (--durable). It takes the same path as 'run': a
message already in the ledger is a duplicate and does nothing; a new one is
applied with --apply in the same transaction. Everything past run's ack floor
is run's to apply and to send, so a replay never swallows an effect run has
yet to send.

Outbox effects of messages up to the floor are suppressed by default: with
--webhook the rows are recorded as 'suppressed' and nothing is sent, so
rebuilding a host never re-sends an email or a webhook. --send-effects sends
them. --to-seq N moves the end; past run's floor, the effects of the messages
the replay applies are queued for run to send. Without run's durable on the
stream, --to-seq is required: messages up to it count as handled elsewhere.

It uses a temporary consumer, so the durable of 'run' is not moved. Progress
goes to standard error (a bar on a terminal, lines otherwise); the summary to
standard output: applied, duplicates, conflicts, suppressed, queued for run,
dead letters.`

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

// replayBound is where a replay stops, and up to where run has already
// handled every message (their effects are suppressed by the replay).
type replayBound struct {
	upTo, handled uint64
}

// boundReplay reads the live durable's ack floor: run has handled every
// message up to it, and whatever lies past it is run's to apply and to send.
// Without the durable, --to-seq says how far messages count as handled.
func boundReplay(ctx context.Context, js jetstream.JetStream, stream, durable string, toSeq uint64) (replayBound, error) {
	cons, err := js.Consumer(ctx, stream, durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		if toSeq == 0 {
			return replayBound{}, usagef("stream %s has no durable %q, so replay cannot tell which messages run has yet to handle; "+
				"name run's durable with --durable, or give --to-seq N: messages up to N then count as handled elsewhere and their effects are suppressed",
				stream, durable)
		}
		return replayBound{upTo: toSeq, handled: toSeq}, nil
	}
	if err != nil {
		return replayBound{}, fmt.Errorf("look up durable %s of stream %s: %w", durable, stream, err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return replayBound{}, fmt.Errorf("look up durable %s of stream %s: %w", durable, stream, err)
	}
	handled := info.AckFloor.Stream
	return replayBound{upTo: cmp.Or(toSeq, handled), handled: handled}, nil
}

// followReplay shows progress on out (standard error: standard output
// carries the summary) and calls done once the replay has handled every
// message up to its bound.
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
		finished, err := c.ReplayDone(ctx)
		if err != nil {
			continue // a transient error: the next tick asks again
		}
		n := c.Counts()
		handled := int64(n.Applied + n.Duplicates + n.Conflicts + n.DeadLetters)
		if bar != nil {
			bar.Set64(handled) //nolint:errcheck // drawing only
		} else if time.Since(lastLine) >= 5*time.Second {
			fmt.Fprintf(out, "replayed %d messages\n", handled)
			lastLine = time.Now()
		}
		if finished {
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
	Queued      int64   `json:"queued"` // effects of messages past run's ack floor, left for run to send
	DeadLetters uint64  `json:"dead_letters"`
	UpTo        uint64  `json:"up_to"`
	Seconds     float64 `json:"seconds"`
}

func replaySummary(ctx context.Context, st *ledger.Store, c *consumer.Consumer, started time.Time, b replayBound, asJSON bool, out io.Writer) error {
	res := replayResult{UpTo: b.upTo, Seconds: time.Since(started).Seconds()}
	if c != nil {
		n := c.Counts()
		res.Applied, res.Duplicates, res.Conflicts, res.DeadLetters = n.Applied, n.Duplicates, n.Conflicts, n.DeadLetters
	}
	var err error
	if res.Suppressed, err = st.CountOutbox(ctx, ledger.StatusSuppressed, started); err != nil {
		return err
	}
	if res.Queued, err = st.CountOutbox(ctx, ledger.StatusQueued, started); err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(out).Encode(res)
	}
	fmt.Fprintf(out, "replay to seq %d done in %.1fs: %d applied, %d duplicates, %d conflicts, %d effects suppressed, %d queued for run, %d dead letters\n",
		res.UpTo, res.Seconds, res.Applied, res.Duplicates, res.Conflicts, res.Suppressed, res.Queued, res.DeadLetters)
	return nil
}
