package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
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
	"github.com/nats-io/nats.go/jetstream"
)

const demoHelp = `
Run the whole story on an embedded JetStream server in a temporary directory:
publish payment events (some twice with the same id), consume them into a
balance per account, SIGKILL the consumer between a commit and its ack,
restart it, and show that every event was applied exactly once.
Exit 0 when the balances match, 1 when they do not.`

const (
	demoStream  = "DEMO"
	demoSubject = "demo.payments"
	demoSchema  = `CREATE TABLE IF NOT EXISTS balances (account TEXT PRIMARY KEY, amount INTEGER NOT NULL)`
	demoApply   = `INSERT INTO balances (account, amount)
		VALUES (json_extract(:data, '$.account'), json_extract(:data, '$.amount'))
		ON CONFLICT (account) DO UPDATE SET amount = amount + excluded.amount`
	demoCrashBatch = 3
)

// demoPlan keeps AckWait at about two seconds so the redelivery after the
// crash comes quickly.
var demoPlan = ackwait.Plan{Deadline: time.Second, BatchSize: 25, BufferWait: 250 * time.Millisecond,
	CommitMargin: 500 * time.Millisecond, AckMargin: 250 * time.Millisecond}

var demoAccounts = []string{"alice", "bob", "carol", "dave", "erin"}

// demoCmd is `jetledger demo`.
type demoCmd struct {
	Events int  `name:"events" default:"500" help:"distinct payment events to publish"`
	Resend int  `name:"resend" default:"50" help:"events published a second time with the same id"`
	Keep   bool `name:"keep" help:"keep the temporary directory (database and stream store) and print its path"`
}

func (demoCmd) Help() string { return demoHelp }

// demoTotals are what the demo published per account.
type demoTotals struct {
	expected, count map[string]int
}

func (c *demoCmd) Run(inv *invocation) error {
	ctx, out := inv.ctx, inv.stdout
	switch {
	case c.Events < 4*demoPlan.BatchSize:
		return usagef("--events %d: want at least %d", c.Events, 4*demoPlan.BatchSize)
	case c.Resend < 0 || c.Resend > c.Events:
		return usagef("--resend %d: want 0 up to --events (%d)", c.Resend, c.Events)
	}
	n, err := node.StartScratch(ctx, "demo", node.Config{Logger: quiet}) // the demo tells its own story
	if err != nil {
		return err
	}
	defer closeScratch(n, c.Keep, out)
	dbPath := filepath.Join(n.Dir, "demo.db")
	fmt.Fprintf(out, "1. Embedded JetStream server at %s, ledger %s\n", n.ClientURL(), dbPath)
	js, err := n.JetStream()
	if err != nil {
		return err
	}
	if _, err := stream.Ensure(ctx, js, stream.Config{Name: demoStream, Subjects: []string{demoSubject}, Duplicates: 2 * time.Minute, Logger: quiet}); err != nil {
		return err
	}
	totals, err := c.publish(ctx, js, out)
	if err != nil {
		return err
	}
	if err := crashingConsumer(ctx, n.ClientURL(), dbPath, inv.stderr); err != nil {
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
	if err := c.restart(ctx, js, st, out); err != nil {
		return err
	}
	return c.prove(ctx, st, totals, out)
}

// publish sends every event with an id, some twice, as a retrying publisher would.
func (c *demoCmd) publish(ctx context.Context, js jetstream.JetStream, out io.Writer) (demoTotals, error) {
	t := demoTotals{expected: map[string]int{}, count: map[string]int{}}
	rng := rand.New(rand.NewPCG(1, 2))
	pub, err := publisher.New(js, publisher.Config{Logger: quiet})
	if err != nil {
		return t, err
	}
	msgs := make([]publisher.Message, 0, c.Events+c.Resend)
	for i := 0; i < c.Events; i++ {
		acct := demoAccounts[rng.IntN(len(demoAccounts))]
		amount := 1 + rng.IntN(100)
		t.expected[acct] += amount
		t.count[acct]++
		msgs = append(msgs, publisher.Message{Subject: demoSubject, ID: pub.NewID(),
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
func (c *demoCmd) restart(ctx context.Context, js jetstream.JetStream, st *ledger.Store, out io.Writer) error {
	h, err := sqlhandler.New(ctx, st, sqlhandler.Config{Apply: demoApply})
	if err != nil {
		return err
	}
	cons, err := consumer.New(ctx, js, st, consumer.Config{Stream: demoStream, Plan: demoPlan, Handler: h.Handle, Logger: quiet})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "4. Consumer #2 started; the server redelivers unacked events after AckWait (%s)\n", demoPlan.AckWait())
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
func (c *demoCmd) prove(ctx context.Context, st *ledger.Store, t demoTotals, out io.Writer) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "account\tevents\texpected\tbalance\texactly once\t")
	ok := true
	var totalEvents, totalExpected, totalBalance int
	for _, a := range demoAccounts {
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
