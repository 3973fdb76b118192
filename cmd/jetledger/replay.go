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
the last message its durable (--durable) was delivered. It takes the same path
as 'run': a message already in the ledger is a duplicate and does nothing; a
new one is applied with --apply in the same transaction. What lies past that
point is run's to apply and to send.

Effects (--webhook: give the replay run's): a replay never swallows an effect
run has yet to send, and never sends twice one run already has. Up to run's
ack floor, run handled every message: their effects are recorded as
'suppressed', not sent. Between the floor and the last delivered message, run
may or may not have sent them: their effects go to review, for a person to
check at the destination. A message run dead-lettered is applied with its
effect queued, and its dead letter removed. Queued effects are sent by run.
--send-effects queues every effect. A replay past the ack floor, or reaching a
dead letter, needs --webhook as run has it, or --no-effects if run has none.
--to-seq N moves the end; without run's durable on the stream it is required,
and messages up to it count as handled elsewhere.

It uses a temporary consumer, so the durable of 'run' is not moved. Progress
goes to standard error (a bar on a terminal, lines otherwise); the summary to
standard output: applied, duplicates, conflicts, suppressed, queued for run,
in review, dead letters.`

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

// replayBound is where a replay stops, where run stands: every message up
// to its ack floor handled, none past the last it was delivered.
type replayBound struct {
	upTo, floor, delivered uint64
}

// replayEffects decides what becomes of a replayed message's outbox effect,
// so that a replay never swallows one that run has yet to send, nor sends
// twice one that run already has.
type replayEffects struct {
	replayBound
	sendAll bool // --send-effects: queue every effect for run to send
}

const reviewPastFloor = "replayed past run's ack floor: run had this message delivered and may have sent its effect; " +
	"check the destination for the idempotency key (the row id), then resolve the row"

// record settles the message's dead letter, if run gave up on it, and
// records its effect (for sink, when there is one): queued for run when run
// never handled the message (dead-lettered, or never delivered) or with
// --send-effects; suppressed when run did (up to its ack floor); in review
// when nobody can tell (delivered to run past its floor).
func (r *replayEffects) record(ctx context.Context, tx *ledger.Tx, d ledger.Delivery, sink string) error {
	dead, err := tx.ClearDeadLetter(ctx)
	if err != nil || sink == "" {
		return err
	}
	switch {
	case dead || d.Sequence > r.delivered || r.sendAll:
		_, err = tx.Enqueue(ctx, sink, d.Data)
	case d.Sequence <= r.floor:
		_, err = tx.EnqueueSuppressed(ctx, sink, d.Data)
	default:
		_, err = tx.EnqueueReview(ctx, sink, d.Data, reviewPastFloor)
	}
	return err
}

// boundReplay reads where run's durable stands: the replay goes up to the
// last message run was delivered (--to-seq moves it), since run may have
// acked messages past its ack floor, which it will never be given again.
// Without the durable, --to-seq says how far messages count as handled
// elsewhere.
func boundReplay(ctx context.Context, js jetstream.JetStream, stream, durable string, toSeq uint64) (replayBound, error) {
	cons, err := js.Consumer(ctx, stream, durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		if toSeq == 0 {
			return replayBound{}, usagef("stream %s has no durable %q, so replay cannot tell which messages run has yet to handle; "+
				"name run's durable with --durable, or give --to-seq N: messages up to N then count as handled elsewhere and their effects are suppressed",
				stream, durable)
		}
		return replayBound{upTo: toSeq, floor: toSeq, delivered: toSeq}, nil
	}
	if err != nil {
		return replayBound{}, fmt.Errorf("look up durable %s of stream %s: %w", durable, stream, err)
	}
	info := cons.CachedInfo()
	b := replayBound{floor: info.AckFloor.Stream, delivered: max(info.Delivered.Stream, info.AckFloor.Stream)}
	b.upTo = cmp.Or(toSeq, b.delivered)
	return b, nil
}

// checkEffectsDecided refuses a replay that would apply messages run has not
// handled (past its ack floor, or dead-lettered) without being told what run
// does with effects: applied without an outbox row, their effects would be
// lost, since run then meets them as duplicates.
func checkEffectsDecided(ctx context.Context, st *ledger.Store, stream string, b replayBound, sink consumer.Sink, noEffects bool) error {
	if sink != nil || noEffects {
		return nil
	}
	if b.upTo > b.floor {
		return usagef("the replay goes past run's ack floor (seq %d, up to %d): give it run's --webhook so their effects are recorded, or --no-effects if run has none",
			b.floor, b.upTo)
	}
	dls, err := st.DeadLetters(ctx, 0)
	if err != nil {
		return err
	}
	for _, dl := range dls {
		if dl.Stream == stream && dl.Sequence <= b.upTo {
			return usagef("the replay reaches dead letter %d (seq %d), which run never applied: give it run's --webhook so its effect is recorded, or --no-effects if run has none",
				dl.ID, dl.Sequence)
		}
	}
	return nil
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
	Queued      int64   `json:"queued"` // effects left for run to send: of messages run never handled, or with --send-effects
	Review      int64   `json:"review"` // effects of messages run was delivered past its ack floor: a person checks the destination
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
	if res.Review, err = st.CountOutbox(ctx, ledger.StatusReview, started); err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(out).Encode(res)
	}
	fmt.Fprintf(out, "replay to seq %d done in %.1fs: %d applied, %d duplicates, %d conflicts, %d effects suppressed, %d queued for run, %d in review, %d dead letters\n",
		res.UpTo, res.Seconds, res.Applied, res.Duplicates, res.Conflicts, res.Suppressed, res.Queued, res.Review, res.DeadLetters)
	return nil
}
