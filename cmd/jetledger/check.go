package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/nats-io/nats.go/jetstream"
)

const checkHelp = `
Check a live consumer against the timing plan that 'run' would use with the
same flags: explicit acks, AckWait (and every BackOff step) at least
buffer-wait + deadline + commit + ack margins, MaxAckPending at least the
batch size. Exit 0 when it holds, 1 with the durations and the fix when not.`

func checkCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	n := natsFlags{url: defaultNATS}
	var stream, durable string
	var pf planFlags
	var lf logFlags
	fs := newFlags("check", "check [--stream S] [--durable D] [plan flags]", checkHelp, stdout)
	n.register(fs, "NATS server URL")
	fs.StringVar(&stream, "stream", "EVENTS", "stream of the consumer")
	fs.StringVar(&durable, "durable", consumer.DurableDefault, "durable consumer to check")
	pf.register(fs)
	lf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	plan, err := pf.plan()
	if err != nil {
		return err
	}
	log, err := lf.logger(stderr)
	if err != nil {
		return err
	}
	nc, js, err := connect(ctx, n, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cons, err := js.Consumer(ctx, stream, durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("consumer %s/%s does not exist; 'jetledger run' creates it with AckWait %s", stream, durable, plan.AckWait())
	}
	if err != nil {
		return fmt.Errorf("look up consumer %s/%s: %w", stream, durable, err)
	}
	cfg := cons.CachedInfo().Config
	fmt.Fprintf(stdout, "consumer   %s/%s\nack wait   %s\nplan       %s\n", stream, durable, cfg.AckWait, plan)
	if err := plan.Validate(cfg); err != nil {
		fmt.Fprintln(stdout, "result     UNSAFE")
		return fmt.Errorf("consumer %s/%s: %w", stream, durable, err)
	}
	fmt.Fprintln(stdout, "result     ok")
	return nil
}
