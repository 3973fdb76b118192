package service

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats.go/jetstream"
)

// Acks above the ack floor count: with the first of three messages still
// pending and the two after it acknowledged, the floor stays below all
// three, and a copy that holds none of them lacks acknowledged messages
// (a nemesis schedule had the log begun again from such a copy and lost
// one). With all three pending, it lacks none; past them, none either.
func TestAckedAfterSeesAcksAboveTheFloor(t *testing.T) {
	t.Parallel()
	js, ctx := streamS(t)
	for _, subj := range []string{"s.a", "s.b", "s.a", "s.a"} {
		if _, err := js.Publish(ctx, subj, nil); err != nil {
			t.Fatal(err)
		}
	}
	c, err := js.CreateConsumer(ctx, "S", jetstream.ConsumerConfig{Durable: "d", FilterSubject: "s.a", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := c.FetchNoWait(3)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []jetstream.Msg
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	if len(msgs) != 3 {
		t.Fatalf("fetched %d, want 3", len(msgs))
	}
	after := ackedAfter(js, "S", "d")
	// A copy through stream sequence n, of these messages with no id.
	acked := func(ctx context.Context, n uint64) (uint64, error) {
		return after(ctx, n, func(_ context.Context, _ string, seq uint64) (bool, error) { return seq <= n, nil })
	}
	if seq, err := acked(ctx, 0); err != nil || seq != 0 {
		t.Fatalf("all three pending: %d %v, want 0 (none acknowledged)", seq, err)
	}
	for _, m := range msgs[1:] {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if seq, err := acked(ctx, 0); err != nil || seq != 1 {
		t.Fatalf("seqs 3 and 4 acknowledged above a floor of 0: %d %v, want 1 (the first the copy lacks)", seq, err)
	}
	if seq, err := acked(ctx, 4); err != nil || seq != 0 {
		t.Fatalf("a copy through seq 4: %d %v, want 0", seq, err)
	}
	// A copy that has seen seq 4 but lacks 1 (pending, failing say) and 3
	// (acknowledged): the pending one does not hide the other.
	holes, err := after(ctx, 4, func(_ context.Context, _ string, seq uint64) (bool, error) { return seq == 4, nil })
	if err != nil || holes != 1 {
		t.Fatalf("a copy lacking seqs 1 and 3 below its position: %d %v, want 1 (the first it lacks)", holes, err)
	}
}

// Below the ack floor every message was acknowledged: a copy that lacks
// one waits, but one holding its id at another sequence (published again
// past the duplicate window) holds it.
func TestAckedAfterBelowTheFloorGoesByID(t *testing.T) {
	t.Parallel()
	js, ctx := streamS(t)
	for _, id := range []string{"a", "b"} {
		if _, err := js.Publish(ctx, "s.a", nil, jetstream.WithMsgID(id)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := js.CreateConsumer(ctx, "S", jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := c.FetchNoWait(2)
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	after := ackedAfter(js, "S", "d")
	holding := func(ids ...string) changelog.Holds {
		return func(_ context.Context, id string, _ uint64) (bool, error) { return slices.Contains(ids, id), nil }
	}
	if seq, err := after(ctx, 1, holding("a", "b")); err != nil || seq != 0 {
		t.Fatalf("a copy through seq 1 holding both ids: %d %v, want 0", seq, err)
	}
	if seq, err := after(ctx, 1, holding("a")); err != nil || seq != 2 {
		t.Fatalf("a copy through seq 1 lacking b: %d %v, want 2", seq, err)
	}
}

// streamS is a server with the stream S on s.>.
func streamS(t *testing.T) (jetstream.JetStream, context.Context) {
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	return js, t.Context()
}
