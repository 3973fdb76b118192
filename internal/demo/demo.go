// Package demo is the story 'jetledger demo' tells: payment events
// published (some twice), consumed into balances, the consumer SIGKILLed
// between a commit and its ack and started again, and every event applied
// exactly once.
package demo

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/node"
	"github.com/jetledger/jetledger/publisher"
	"github.com/jetledger/jetledger/sqlhandler"
	"github.com/jetledger/jetledger/stream"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const Help = `
Run the whole story on an embedded JetStream server in a temporary directory:
publish payment events (some twice with the same id), consume them into a
balance per account, SIGKILL the consumer between a commit and its ack,
restart it, and show that every event was applied exactly once.
Exit 0 when the balances match, 1 when they do not.`

const (
	Stream  = "DEMO"
	Subject = "demo.payments"
	Schema  = `CREATE TABLE IF NOT EXISTS balances (account TEXT PRIMARY KEY, amount INTEGER NOT NULL)`
	Apply   = `INSERT INTO balances (account, amount)
		VALUES (json_extract(:data, '$.account'), json_extract(:data, '$.amount'))
		ON CONFLICT (account) DO UPDATE SET amount = amount + excluded.amount`
	CrashBatch = 3
)

// Plan keeps AckWait at about two seconds so the redelivery after the
// crash comes quickly.
var Plan = ackwait.Plan{Deadline: time.Second, BatchSize: 25, BufferWait: 250 * time.Millisecond,
	CommitMargin: 500 * time.Millisecond, AckMargin: 250 * time.Millisecond}

var accounts = []string{"alice", "bob", "carol", "dave", "erin"}

// totals are what the demo published per account.
type totals struct {
	expected, count map[string]int
}

// Options size the demo.
type Options struct {
	Events, Resend int  // distinct events, and how many are sent twice
	Keep           bool // keep the scratch directory, saying where it is
}

// Check refuses options the story cannot be told with, naming the flag.
func (o Options) Check() error {
	switch {
	case o.Events < 4*Plan.BatchSize:
		return fmt.Errorf("--events %d: want at least %d", o.Events, 4*Plan.BatchSize)
	case o.Resend < 0 || o.Resend > o.Events:
		return fmt.Errorf("--resend %d: want 0 up to --events (%d)", o.Resend, o.Events)
	}
	return nil
}

// Run tells the story to out; consumer #1, this binary run again as
// "demo-consumer" (CrashingConsumer), writes its errors to stderr. An
// error when the balances do not match.
func Run(ctx context.Context, o Options, out, stderr io.Writer) error {
	n, err := node.StartScratch(ctx, "demo", node.Config{Logger: quiet}) // the demo tells its own story
	if err != nil {
		return err
	}
	defer n.Finish(o.Keep, out)
	dbPath := filepath.Join(n.Dir, "demo.db")
	fmt.Fprintf(out, "1. Embedded JetStream server at %s, ledger %s\n", n.ClientURL(), dbPath)
	js, err := n.JetStream()
	if err != nil {
		return err
	}
	if _, err := stream.Ensure(ctx, js, stream.Config{Name: Stream, Subjects: []string{Subject}, Duplicates: 2 * time.Minute, Logger: quiet}); err != nil {
		return err
	}
	totals, err := o.publish(ctx, js, out)
	if err != nil {
		return err
	}
	if err := crashingConsumer(ctx, n.ClientURL(), dbPath, stderr); err != nil {
		return err
	}
	st, err := ledger.Open(dbPath, ledger.Config{Logger: quiet})
	if err != nil {
		return err
	}
	defer st.Close()
	if err := tellCrash(ctx, js, st, out); err != nil {
		return err
	}
	if err := o.restart(ctx, js, st, out); err != nil {
		return err
	}
	return o.prove(ctx, st, totals, out)
}

// quiet is the parts' logger: the demo tells its own story.
var quiet = slog.New(slog.DiscardHandler)

// publish sends every event with an id, some twice, as a retrying publisher would.
func (c Options) publish(ctx context.Context, js jetstream.JetStream, out io.Writer) (totals, error) {
	t := totals{expected: map[string]int{}, count: map[string]int{}}
	rng := rand.New(rand.NewPCG(1, 2))
	pub, err := publisher.New(js, publisher.Config{Logger: quiet})
	if err != nil {
		return t, err
	}
	msgs := make([]publisher.Message, 0, c.Events+c.Resend)
	for i := 0; i < c.Events; i++ {
		acct := accounts[rng.IntN(len(accounts))]
		amount := 1 + rng.IntN(100)
		t.expected[acct] += amount
		t.count[acct]++
		msgs = append(msgs, publisher.Message{Subject: Subject, ID: pub.NewID(),
			Data: []byte(fmt.Sprintf(`{"account":%q,"amount":%d}`, acct, amount))})
	}
	for _, i := range rng.Perm(c.Events)[:c.Resend] {
		msgs = append(msgs, msgs[i])
	}
	acks, err := pub.PublishBatch(ctx, msgs)
	if err != nil {
		return t, err
	}
	dropped := 0
	for _, a := range acks {
		if a.Duplicate {
			dropped++
		}
	}
	fmt.Fprintf(out, "2. Published %d messages: %d distinct events, %d re-sent with the same Nats-Msg-Id; the stream dropped %d as duplicates\n",
		len(msgs), c.Events, c.Resend, dropped)
	return t, nil
}

// restart runs consumer #2 until every event is acked: the server
// redelivers what #1 committed but never acked.
func (c Options) restart(ctx context.Context, js jetstream.JetStream, st *ledger.Store, out io.Writer) error {
	h, err := sqlhandler.New(ctx, st, sqlhandler.Config{Apply: Apply})
	if err != nil {
		return err
	}
	cons, err := consumer.New(ctx, js, st, consumer.Config{Stream: Stream, Plan: Plan, Handler: h.Handle, Logger: quiet})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "4. Consumer #2 started; the server redelivers unacked events after AckWait (%s)\n", Plan.AckWait())
	runCtx, stopRun := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- cons.Run(runCtx) }()
	err = waitAllAcked(ctx, cons, uint64(c.Events), 2*time.Minute)
	stopRun()
	if rerr := <-runDone; err == nil {
		err = rerr
	}
	if err != nil {
		return err
	}
	n := cons.Counts()
	fmt.Fprintf(out, "   It applied %d new events and recognised %d redelivered ones as duplicates: acked, not applied again\n\n",
		n.Applied, n.Duplicates)
	return nil
}

// prove prints the balances against the sums of the distinct events.
func (c Options) prove(ctx context.Context, st *ledger.Store, t totals, out io.Writer) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "account\tevents\texpected\tbalance\texactly once\t")
	ok := true
	var totalEvents, totalExpected, totalBalance int
	for _, a := range accounts {
		var bal int
		if err := st.DB().QueryRowContext(ctx, `SELECT amount FROM balances WHERE account = ?`, a).Scan(&bal); err != nil {
			return fmt.Errorf("read balance of %s: %w", a, err)
		}
		match := bal == t.expected[a]
		ok = ok && match
		totalEvents += t.count[a]
		totalExpected += t.expected[a]
		totalBalance += bal
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t\n", a, t.count[a], t.expected[a], bal, yesNo(match))
	}
	fmt.Fprintf(tw, "total\t%d\t%d\t%d\t%s\t\n", totalEvents, totalExpected, totalBalance, yesNo(totalBalance == totalExpected))
	tw.Flush()
	stats, err := st.Stats(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nprocessed_messages rows: %d for %d distinct events\n", stats.Processed, c.Events)
	if !ok || stats.Processed != int64(c.Events) {
		return errors.New("balances do not match the published events")
	}
	fmt.Fprintln(out, "Every event was applied exactly once, across a duplicate publish and a crash between commit and ack.")
	return nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "NO"
}

// Killed is what consumer #1 says just before it kills itself.
const Killed = "committed batch"

// crashingConsumer runs consumer #1 of the demo in a child process, which
// SIGKILLs itself right after committing batch CrashBatch, before a
// single ack of that batch is sent.
func crashingConsumer(ctx context.Context, url, dbPath string, stderr io.Writer) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	child := exec.CommandContext(ctx, self, "demo-consumer", "--nats", url, "--db", dbPath)
	child.Stderr = stderr
	pipe, err := child.StdoutPipe()
	if err != nil {
		return err
	}
	if err := child.Start(); err != nil {
		return fmt.Errorf("start consumer #1: %w", err)
	}
	killed := false
	for sc := bufio.NewScanner(pipe); sc.Scan(); {
		killed = killed || sc.Text() == Killed
	}
	waitErr := child.Wait()
	var exitErr *exec.ExitError
	if !errors.As(waitErr, &exitErr) || exitErr.ExitCode() != -1 || !killed {
		return fmt.Errorf("consumer #1 should have been killed after its commit; it ended with %v", waitErr)
	}
	return nil
}

// tellCrash says what consumer #1 left when the kill came: the ledger's
// rows are what it committed, the durable's ack floor what the server has
// acks for. Batches are pipelined, so the batch after the one killed in may
// have committed too, and every committed event above the floor comes back
// to consumer #2 as a duplicate.
func tellCrash(ctx context.Context, js jetstream.JetStream, st *ledger.Store, out io.Writer) error {
	stats, err := st.Stats(ctx)
	if err != nil {
		return err
	}
	cons, err := js.Consumer(ctx, Stream, consumer.DurableDefault)
	if err != nil {
		return err
	}
	committed, acked := uint64(stats.Processed), cons.CachedInfo().AckFloor.Stream
	fmt.Fprintf(out, "3. Consumer #1 committed %d events and was SIGKILLed after committing batch %d, before acking it;\n", committed, CrashBatch)
	fmt.Fprintf(out, "   the server had acks for %d of them, so %d committed events were never acked (batches are pipelined: the next one commits while one is acked)\n",
		acked, committed-acked)
	return nil
}

// waitAllAcked polls the demo consumer until every stream message is acked.
func waitAllAcked(ctx context.Context, cons *consumer.Consumer, last uint64, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if info, err := cons.Info(ctx); err == nil && info.AckFloor.Stream >= last && info.NumAckPending == 0 && info.NumPending == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for every event to be acked: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// CrashingConsumer is consumer #1 of the demo, on the ledger at db: it
// consumes until it has committed batch CrashBatch, then sends the acks
// of the batches before (they may still wait in the client's buffer),
// says Killed on out and kills itself before sending that batch's.
func CrashingConsumer(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, db string, out io.Writer) error {
	st, err := ledger.Open(db, ledger.Config{Logger: quiet})
	if err != nil {
		return err
	}
	defer st.Close()
	h, err := sqlhandler.New(ctx, st, sqlhandler.Config{Schema: Schema, Apply: Apply})
	if err != nil {
		return err
	}
	batches := 0
	cons, err := consumer.New(ctx, js, st, consumer.Config{
		Stream: Stream, Plan: Plan, Handler: h.Handle, Logger: quiet,
		AfterCommit: func(consumer.BatchReport) {
			if batches++; batches == CrashBatch {
				nc.FlushTimeout(time.Second) //nolint:errcheck // the acks the server has are counted after the kill
				fmt.Fprintln(out, Killed)
				p, _ := os.FindProcess(os.Getpid())
				p.Kill() //nolint:errcheck // SIGKILL: the crash the demo is about
				select {}
			}
		},
	})
	if err != nil {
		return err
	}
	return cons.Run(ctx)
}
