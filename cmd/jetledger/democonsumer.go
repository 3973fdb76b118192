package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// crashingConsumer runs consumer #1 of the demo in a child process, which
// SIGKILLs itself right after committing batch demoCrashBatch, before a
// single ack of that batch is sent.
func crashingConsumer(ctx context.Context, url, dbPath string, stderr, out io.Writer) error {
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
	var committed, unacked int
	sc := bufio.NewScanner(pipe)
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
	fmt.Fprintf(out, "3. Consumer #1 committed %d events in %d batches and was SIGKILLed after committing batch %d, before acking its %d events\n",
		committed, demoCrashBatch, demoCrashBatch, unacked)
	return nil
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
	if _, err := st.DB().ExecContext(ctx, demoSchema); err != nil {
		return err
	}
	h, err := newEventsHandler(ctx, st, "", demoApply)
	if err != nil {
		return err
	}
	nc, js, err := connect(ctx, c.NATS, quiet)
	if err != nil {
		return err
	}
	defer nc.Close()
	batches, committed := 0, 0
	cons, err := consumer.New(ctx, js, st, consumer.Config{
		Stream: demoStream, Plan: demoPlan, Handler: h.Handle, Logger: quiet,
		AfterCommit: func(r consumer.BatchReport) {
			batches++
			committed += len(r.Results)
			if batches == demoCrashBatch {
				fmt.Fprintf(inv.stdout, "committed %d %d\n", committed, len(r.Results))
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
