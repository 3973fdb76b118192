package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/sqlhandler"
	"github.com/nats-io/nats.go/jetstream"
)

// demoKilled is what consumer #1 says just before it kills itself.
const demoKilled = "committed batch"

// crashingConsumer runs consumer #1 of the demo in a child process, which
// SIGKILLs itself right after committing batch demoCrashBatch, before a
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
		killed = killed || sc.Text() == demoKilled
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
	cons, err := js.Consumer(ctx, demoStream, consumer.DurableDefault)
	if err != nil {
		return err
	}
	committed, acked := uint64(stats.Processed), cons.CachedInfo().AckFloor.Stream
	fmt.Fprintf(out, "3. Consumer #1 committed %d events and was SIGKILLed after committing batch %d, before acking it;\n", committed, demoCrashBatch)
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

// demoConsumerCmd is consumer #1 of the demo: it consumes until it has
// committed batch demoCrashBatch, then sends the acks of the batches before
// (they may still wait in the client's buffer) and kills itself before
// sending that batch's.
type demoConsumerCmd struct {
	dbFlag
	NATS natsFlags `embed:""`
}

func (c *demoConsumerCmd) Run(inv *invocation) error {
	ctx := inv.ctx
	st, err := ledger.Open(c.DB, ledger.Config{Logger: quiet})
	if err != nil {
		return err
	}
	defer st.Close()
	h, err := sqlhandler.New(ctx, st, sqlhandler.Config{Schema: demoSchema, Apply: demoApply})
	if err != nil {
		return err
	}
	nc, js, err := connect(ctx, c.NATS, quiet)
	if err != nil {
		return err
	}
	defer nc.Close()
	batches := 0
	cons, err := consumer.New(ctx, js, st, consumer.Config{
		Stream: demoStream, Plan: demoPlan, Handler: h.Handle, Logger: quiet,
		AfterCommit: func(consumer.BatchReport) {
			if batches++; batches == demoCrashBatch {
				nc.FlushTimeout(time.Second) //nolint:errcheck // the acks the server has are counted after the kill
				fmt.Fprintln(inv.stdout, demoKilled)
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
