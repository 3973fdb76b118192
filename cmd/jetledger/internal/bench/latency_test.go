package bench

import (
	"context"
	"testing"
	"time"

	"github.com/jetledger/jetledger/node"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

type doneFuture struct {
	ok  chan *jetstream.PubAck
	msg *nats.Msg
}

func (f doneFuture) Ok() <-chan *jetstream.PubAck { return f.ok }
func (f doneFuture) Err() <-chan error            { return nil }
func (f doneFuture) Msg() *nats.Msg               { return f.msg }

// ackedJS acks every publish at once; its last publish runs onLast, as the
// latency run's consumer cancels the run once it has committed the last
// message, which can come before offer's stamping goroutine has looked at
// the last futures.
type ackedJS struct {
	jetstream.JetStream
	n, total int
	onLast   func()
}

func (j *ackedJS) PublishMsgAsync(m *nats.Msg, _ ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	f := doneFuture{ok: make(chan *jetstream.PubAck, 1), msg: m}
	f.ok <- &jetstream.PubAck{}
	if j.n++; j.n == j.total {
		j.onLast()
	}
	return f, nil
}

// Every publish was acked; the run was cancelled only because everything
// was committed. offer must not then report the cancellation as a failure
// (latency returns it, and the whole bench ends), nor leave acked messages
// without their publish-ack stamp.
func TestOfferIsNotFailedByTheRunEndingAfterEveryPublishWasAcked(t *testing.T) {
	for try := range 20 {
		ctx, cancel := context.WithCancel(context.Background())
		tr := make(trace, 50)
		js := &ackedJS{total: len(tr), onLast: cancel}
		err := offer(ctx, js, "s", 1_000_000, tr)
		cancel()
		if err != nil {
			t.Fatalf("try %d: offer = %v after every publish was acked", try, err)
		}
		for i := range tr {
			if tr[i][1] == 0 {
				t.Fatalf("try %d: message %d acked but not stamped", try, i)
			}
		}
	}
}

// The latency run, small, on a real server: every message is measured and
// the run does not fail for its own ending.
func TestLatencyRunEndsCleanly(t *testing.T) {
	ctx := context.Background()
	n, err := node.StartScratch(ctx, "lat", node.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Remove()
	nc, err := nats.Connect(n.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{JS: js, Dir: t.TempDir(), Handler: balanceHandler, Batch: 100, LatencyDuration: 500 * time.Millisecond}
	for i := range 2 {
		l, err := latency(ctx, cfg, i, 4000)
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if l.Messages != 2000 {
			t.Errorf("run %d: %d messages measured, want 2000", i, l.Messages)
		}
		for _, s := range l.Stages {
			if s.P50Ms < 0 {
				t.Logf("run %d: stage %s p50 %.3f ms is negative", i, s.Name, s.P50Ms)
			}
		}
		t.Logf("run %d: %+v", i, l)
	}
}
