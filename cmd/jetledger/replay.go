package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jetledger/jetledger/consumer/replay"
	"github.com/jetledger/jetledger/service"
	"github.com/mattn/go-isatty"
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

Effects (--webhook or --effects-subject: give the replay run's): a replay never swallows an effect
run has yet to send, and never sends twice one run already has. Up to run's
ack floor, run handled every message: their effects are recorded as
'suppressed', not sent. Between the floor and the last delivered message, run
may or may not have sent them: their effects go to review, for a person to
check at the destination. A message run dead-lettered is applied with its
effect queued, and its dead letter removed. Queued effects are sent by run.
--send-effects queues every effect. A replay past the ack floor, or reaching a
dead letter, needs --webhook or --effects-subject as run has it, or
--no-effects if run has none.
--to-seq N moves the end; without run's durable on the stream it is required,
and messages up to it count as handled elsewhere.

Without --stream, the replay reads the stream and durable run recorded in
the ledger (--db); a ledger that served several asks for --stream (exit 2).
A stream that is another instance than the one run last consumed into the
ledger (another server's of that name, a wrong --nats say, or one made again
since) is refused (exit 1): its messages say nothing of the ledger's.

It uses a temporary consumer, so the durable of 'run' is not moved. Progress
goes to standard error (a bar on a terminal, lines otherwise); the summary to
standard output: applied, duplicates, conflicts, suppressed, queued for run,
in review, dead letters.`

// replayCmd is `jetledger replay`.
type replayCmd struct {
	consumeFlags `kong:"set='durable_help=the live durable consumer of run: the replay stops at the last message it was delivered and leaves the rest, with its effects, to run',set='webhook_help=the --webhook of run: the outbox effects of replayed messages are recorded for it (the replay sends nothing)'"`
	FromSeq      uint64 `name:"from-seq" placeholder:"N" help:"replay from this stream sequence (default: the stream's start)"`
	ToSeq        uint64 `name:"to-seq" placeholder:"N" help:"replay up to this stream sequence (default: the last one delivered to --durable, where run stands); effects of messages run was never delivered are queued for run"`
	Since        string `name:"since" placeholder:"DURATION|TIME" help:"replay messages stored since this long ago (1h) or this time (RFC 3339)"`
	SendEffects  bool   `name:"send-effects" help:"queue the outbox effects of every replayed message for run to send (default: suppressed up to run's ack floor)"`
	NoEffects    bool   `name:"no-effects" help:"run has no outbox effects (no --webhook, no --effects-subject): replay past its ack floor without recording any"`
	// EffectsSubject names run's NATS sink; its rows are run's to send.
	EffectsSubject string `name:"effects-subject" placeholder:"SUBJECT" help:"the --effects-subject of run (its NATS sink): the outbox effects of replayed messages are recorded for it, as with --webhook (the replay sends nothing)"`
	jsonFlag
}

func (replayCmd) Help() string { return replayHelp }

func (c *replayCmd) Run(inv *invocation) error {
	ctx := inv.ctx
	start := replay.Start{FromSeq: c.FromSeq, Since: c.Since, ToSeq: c.ToSeq, NoEffects: c.NoEffects,
		HaveSink: c.Webhook.URL != "" || c.EffectsSubject != "", Names: replayNames}
	from, err := start.From(time.Now())
	if err != nil {
		return c.replayAdvice(err)
	}
	snk, err := replaySink(c.Webhook, c.EffectsSubject)
	if err != nil {
		return err
	}
	// Every flag is checked before the ledger is read for the names left out.
	if err := c.consumeFlags.validate(); err != nil {
		return err
	}
	if err := c.resolveFrom(ctx, c.dbFlag); err != nil {
		return err
	}
	s, err := c.setup(ctx, inv.stderr, snk)
	if err != nil {
		return c.explain(err, c.DB)
	}
	defer s.Close()
	res, err := s.Replay(ctx, service.Replay{From: from, ToSeq: c.ToSeq, SendAll: c.SendEffects,
		EffectsDecided: start.Decided(), Progress: replayProgress(inv.stderr), Timeout: setupTimeout})
	if err != nil {
		return c.replayAdvice(err)
	}
	if res.Empty {
		fmt.Fprintf(inv.stderr, "jetledger replay: nothing to replay: durable %s was delivered nothing from there\n", c.Durable)
	}
	if c.JSON {
		return json.NewEncoder(inv.stdout).Encode(res)
	}
	fmt.Fprintf(inv.stdout, "replay to seq %d done in %.1fs: %d applied, %d duplicates, %d conflicts, %d effects suppressed, %d queued for run, %d in review, %d dead letters\n",
		res.UpTo, res.Seconds, res.Applied, res.Duplicates, res.Conflicts, res.Suppressed, res.Queued, res.Review, res.DeadLetters)
	return nil
}

// replayProgress shows progress on out (standard error: standard output
// carries the summary): a bar on a terminal, a line every 5s otherwise.
func replayProgress(out io.Writer) func(handled int64, finished bool) {
	var bar *progressbar.ProgressBar
	if f, ok := out.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		bar = progressbar.NewOptions64(-1, progressbar.OptionSetWriter(out), progressbar.OptionSetDescription("replaying"),
			progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("msg"),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
	}
	lastLine := time.Now()
	return func(handled int64, finished bool) {
		switch {
		case bar != nil:
			bar.Set64(handled) //nolint:errcheck // drawing only
			if finished {
				bar.Finish() //nolint:errcheck // drawing only
			}
		case time.Since(lastLine) >= 5*time.Second:
			fmt.Fprintf(out, "replayed %d messages\n", handled)
			lastLine = time.Now()
		}
	}
}
