package consumer_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats.go/jetstream"
)

// gatedJS holds this instance's UpdateConsumer until release is closed:
// the interleaving of two runs that read the durable before either raised it.
type gatedJS struct {
	jetstream.JetStream
	entered, release chan struct{}
}

func (g gatedJS) UpdateConsumer(ctx context.Context, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	close(g.entered)
	<-g.release
	return g.JetStream.UpdateConsumer(ctx, stream, cfg)
}

// Two runs with different plans start on one jetledger-made durable: each
// reads AckWait, each raises it to its own plan's. The one that writes last
// wins, even when it lowers what the other just set; the other, running,
// finds its durable lowered and raises it again.
func TestRaiseRaceIsRepaired(t *testing.T) {
	defer consumer.SetDurableCheckEvery(20 * time.Millisecond)()
	e := newEnv(t)
	ctx := context.Background()
	small := ackwait.Plan{Deadline: time.Second, BatchSize: 10}
	if _, err := consumer.New(ctx, e.js, e.st, consumer.Config{Stream: "EV", Durable: "d", Handler: record, Plan: small}); err != nil {
		t.Fatal(err)
	}
	mid := ackwait.Plan{Deadline: 5 * time.Second, BatchSize: 10}
	big := ackwait.Plan{Deadline: 30 * time.Second, BatchSize: 10}
	gate := gatedJS{JetStream: e.js, entered: make(chan struct{}), release: make(chan struct{})}
	done := make(chan error, 1)
	go func() { // run A, plan mid: read the durable, then stalls before its update
		_, err := consumer.New(ctx, gate, e.st, consumer.Config{Stream: "EV", Durable: "d", Handler: record, Plan: mid})
		done <- err
	}()
	<-gate.entered // A has read the durable and is about to write
	b, err := consumer.New(ctx, e.js, e.st, consumer.Config{Stream: "EV", Durable: "d", Handler: record, Plan: big})
	if err != nil {
		t.Fatal(err)
	}
	consumertest.RunConsumer(t, b)
	if got := e.consumerConfig(t, "d").AckWait; got != big.AckWait() {
		t.Fatalf("B raised to %s, want %s", got, big.AckWait())
	}
	close(gate.release)
	if err := <-done; err != nil {
		t.Logf("A: %v", err)
	}
	consumertest.Eventually(t, 10*time.Second, "run B to raise the durable again", func() bool {
		return e.consumerConfig(t, "d").AckWait >= big.AckWait()
	})
}

// The raise sends back the server's config: nothing but AckWait,
// MaxAckPending and the plan metadata may change, whatever else an
// operator edited in meanwhile.
func TestRaiseKeepsOtherFields(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	small := ackwait.Plan{Deadline: time.Second, BatchSize: 10}
	if _, err := consumer.New(ctx, e.js, e.st, consumer.Config{Stream: "EV", Durable: "d", Handler: record, Plan: small}); err != nil {
		t.Fatal(err)
	}
	cfg := e.consumerConfig(t, "d")
	cfg.FilterSubjects = []string{"ev.a", "ev.b"}
	cfg.SampleFrequency = "50%"
	cfg.InactiveThreshold = time.Hour
	cfg.MaxRequestBatch = 77
	cfg.Metadata["team"] = "ops"
	if _, err := e.js.UpdateConsumer(ctx, "EV", cfg); err != nil {
		t.Fatal(err)
	}
	before := e.consumerConfig(t, "d")
	big := ackwait.Plan{Deadline: 30 * time.Second, BatchSize: 2000}
	// The filters it binds with are the durable's (another share would be
	// refused: TestDurableWithOtherFiltersIsRefused).
	b, err := consumer.New(ctx, e.js, e.st, consumer.Config{Stream: "EV", Durable: "d", Handler: record, Plan: big, FilterSubjects: []string{"ev.b", "ev.a"}})
	if err != nil {
		t.Fatal(err)
	}
	consumertest.RunConsumer(t, b)
	after := e.consumerConfig(t, "d")
	if after.AckWait != big.AckWait() {
		t.Fatalf("not raised: %s", after.AckWait)
	}
	if after.MaxAckPending < 2000 {
		t.Fatalf("MaxAckPending %d", after.MaxAckPending)
	}
	after.AckWait, after.MaxAckPending = before.AckWait, before.MaxAckPending
	after.Metadata[consumer.MetadataPlan] = before.Metadata[consumer.MetadataPlan]
	if a, b := fmt.Sprintf("%+v", after), fmt.Sprintf("%+v", before); a != b {
		t.Fatalf("other fields changed:\nbefore %s\nafter  %s", b, a)
	}
}
