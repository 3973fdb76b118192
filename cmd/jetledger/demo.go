package main

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
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/publisher"
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

func demoCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var events, resent int
	var keep bool
	fs := newFlags("demo", "demo [flags]", demoHelp, stdout)
	fs.IntVar(&events, "events", 500, "distinct payment events to publish")
	fs.IntVar(&resent, "resend", 50, "events published a second time with the same id")
	fs.BoolVar(&keep, "keep", false, "keep the temporary directory (database and stream store) and print its path")
	if err := parse(fs, args); err != nil {
		return err
	}
	if events < 4*demoPlan.BatchSize || resent < 0 || resent > events {
		return usagef("--events must be at least %d and --resend between 0 and --events", 4*demoPlan.BatchSize)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil)) // the demo tells its own story
	node, err := newScratchNode(ctx, "demo", 0, log)
	if err != nil {
		return err
	}
	defer node.Close(keep, stdout)
	srv, js := node.srv, node.js
	dbPath := filepath.Join(node.dir, "demo.db")
	fmt.Fprintf(stdout, "1. Embedded JetStream server at %s, ledger %s\n", srv.URL(), dbPath)
	if _, err := ensureStream(ctx, js, demoStream, []string{demoSubject}, 2*time.Minute, log); err != nil {
		return err
	}

	// Publish: every event has an id; some are sent twice, as a retrying publisher would.
	accounts := []string{"alice", "bob", "carol", "dave", "erin"}
	rng := rand.New(rand.NewPCG(1, 2))
	expected := map[string]int{}
	count := map[string]int{}
	pub, err := publisher.New(js, publisher.Config{Logger: log})
	if err != nil {
		return err
	}
	msgs := make([]publisher.Message, 0, events+resent)
	for i := 0; i < events; i++ {
		acct := accounts[rng.IntN(len(accounts))]
		amount := 1 + rng.IntN(100)
		expected[acct] += amount
		count[acct]++
		msgs = append(msgs, publisher.Message{Subject: demoSubject, ID: pub.NewID(),
			Data: []byte(fmt.Sprintf(`{"account":%q,"amount":%d}`, acct, amount))})
	}
	for _, i := range rng.Perm(events)[:resent] {
		msgs = append(msgs, msgs[i])
	}
	acks, err := pub.PublishBatch(ctx, msgs)
	if err != nil {
		return err
	}
	dropped := 0
	for _, a := range acks {
		if a.Duplicate {
			dropped++
		}
	}
	fmt.Fprintf(stdout, "2. Published %d messages: %d distinct events, %d re-sent with the same Nats-Msg-Id; the stream dropped %d as duplicates\n",
		len(msgs), events, resent, dropped)

	// Consumer #1 runs in a child process and SIGKILLs itself right after
	// committing batch 3, before a single ack of that batch is sent.
	self, err := os.Executable()
	if err != nil {
		return err
	}
	child := exec.CommandContext(ctx, self, "demo-consumer", "--nats", srv.URL(), "--db", dbPath)
	child.Stderr = stderr
	out, err := child.StdoutPipe()
	if err != nil {
		return err
	}
	if err := child.Start(); err != nil {
		return fmt.Errorf("start consumer #1: %w", err)
	}
	var committed, unacked int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "committed" {
			committed, _ = strconv.Atoi(f[1])
			unacked, _ = strconv.Atoi(f[2])
		}
	}
	waitErr := child.Wait()
	var exitErr *exec.ExitError
	if !errors.As(waitErr, &exitErr) || exitErr.ExitCode() != -1 || unacked == 0 {
		return fmt.Errorf("consumer #1 should have been killed after its commit; it ended with %v", waitErr)
	}
	fmt.Fprintf(stdout, "3. Consumer #1 committed %d events in %d batches and was SIGKILLed after committing batch %d, before acking its %d events\n",
		committed, demoCrashBatch, demoCrashBatch, unacked)

	// Consumer #2: the server redelivers the unacked events after AckWait.
	st, err := ledger.Open(dbPath, ledger.Config{Logger: log})
	if err != nil {
		return err
	}
	defer st.Close()
	h, err := newEventsHandler(ctx, st, "", demoApply)
	if err != nil {
		return err
	}
	c, err := consumer.New(ctx, js, st, consumer.Config{Stream: demoStream, Plan: demoPlan, Handler: h.handle, Logger: log})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "4. Consumer #2 started; the server redelivers unacked events after AckWait (%s)\n", demoPlan.AckWait())
	runCtx, stopRun := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- c.Run(runCtx) }()
	err = waitAllAcked(ctx, js, uint64(events), 2*time.Minute)
	stopRun()
	if rerr := <-runDone; err == nil {
		err = rerr
	}
	if err != nil {
		return err
	}
	counts := c.Counts()
	fmt.Fprintf(stdout, "   It applied %d new events and recognised %d redelivered ones as duplicates: acked, not applied again\n\n",
		counts.Applied, counts.Duplicates)

	// The proof: balances equal the sum of distinct events.
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "account\tevents\texpected\tbalance\texactly once\t")
	ok := true
	var totalEvents, totalExpected, totalBalance int
	for _, a := range accounts {
		var bal int
		if err := st.DB().QueryRowContext(ctx, `SELECT amount FROM balances WHERE account = ?`, a).Scan(&bal); err != nil {
			return fmt.Errorf("read balance of %s: %w", a, err)
		}
		match := bal == expected[a]
		ok = ok && match
		totalEvents += count[a]
		totalExpected += expected[a]
		totalBalance += bal
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t\n", a, count[a], expected[a], bal, yesNo(match))
	}
	fmt.Fprintf(tw, "total\t%d\t%d\t%d\t%s\t\n", totalEvents, totalExpected, totalBalance, yesNo(totalBalance == totalExpected))
	tw.Flush()
	stats, err := st.Stats(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nprocessed_messages rows: %d for %d distinct events\n", stats.Processed, events)
	if !ok || stats.Processed != int64(events) {
		return errors.New("balances do not match the published events")
	}
	fmt.Fprintln(stdout, "Every event was applied exactly once, across a duplicate publish and a crash between commit and ack.")
	return nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "NO"
}

// waitAllAcked polls the demo consumer until every stream message is acked.
func waitAllAcked(ctx context.Context, js jetstream.JetStream, last uint64, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		cons, err := js.Consumer(ctx, demoStream, consumer.DurableDefault)
		if err == nil {
			info, err := cons.Info(ctx)
			if err == nil && info.AckFloor.Stream >= last && info.NumAckPending == 0 && info.NumPending == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for every event to be acked: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// demoConsumerCmd is consumer #1 of the demo: it consumes until it has
// committed batch demoCrashBatch, reports on stdout and kills itself before
// sending that batch's acks.
func demoConsumerCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var url, dbPath string
	fs := newFlags("demo-consumer", "demo-consumer --nats URL --db FILE", "Consumer #1 of the demo; not for direct use.", stdout)
	fs.StringVar(&url, "nats", "", "NATS URL")
	fs.StringVar(&dbPath, "db", "", "ledger file")
	if err := parse(fs, args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := ledger.Open(dbPath, ledger.Config{Logger: log})
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.DB().ExecContext(ctx, demoSchema); err != nil {
		return err
	}
	h, err := newEventsHandler(ctx, st, "", demoApply)
	if err != nil {
		return err
	}
	nc, js, err := connect(ctx, natsFlags{url: url}, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	batches, committed := 0, 0
	c, err := consumer.New(ctx, js, st, consumer.Config{
		Stream: demoStream, Plan: demoPlan, Handler: h.handle, Logger: log,
		AfterCommit: func(r consumer.BatchReport) {
			batches++
			committed += len(r.Results)
			if batches == demoCrashBatch {
				fmt.Fprintf(stdout, "committed %d %d\n", committed, len(r.Results))
				p, _ := os.FindProcess(os.Getpid())
				p.Kill() //nolint:errcheck // SIGKILL: the crash the demo is about
				select {}
			}
		},
	})
	if err != nil {
		return err
	}
	return c.Run(ctx)
}
