package service

import (
	"testing"
	"time"

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
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	ctx := t.Context()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
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
	acked := ackedAfter(js, "S", "d")
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
}
