package publisher_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/publisher"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func setup(t testing.TB) (jetstream.JetStream, *publisher.Publisher) {
	t.Helper()
	s := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, s)
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.>"}, Duplicates: time.Minute})
	p, err := publisher.New(js, publisher.Config{Timeout: time.Second, RetryWait: 10 * time.Millisecond, Attempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	return js, p
}

func TestPublishIDsAndDuplicates(t *testing.T) {
	t.Parallel()
	js, p := setup(t)
	ctx := context.Background()
	a1, err := p.Publish(ctx, publisher.Message{Subject: "ev.a", Data: []byte(`{"n":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	a2, err := p.Publish(ctx, publisher.Message{Subject: "ev.a", Data: []byte(`{"n":2}`)})
	if err != nil {
		t.Fatal(err)
	}
	if a1.ID == "" || a2.ID <= a1.ID || a1.Duplicate || a2.Sequence != a1.Sequence+1 {
		t.Fatalf("acks = %+v %+v: want increasing ULIDs and sequences", a1, a2)
	}
	// Publishing the same id again is reported as a duplicate with the first sequence.
	again, err := p.Publish(ctx, publisher.Message{Subject: "ev.a", Data: []byte(`{"n":1}`), ID: a1.ID})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Duplicate || again.Sequence != a1.Sequence {
		t.Fatalf("republish = %+v, want duplicate of seq %d", again, a1.Sequence)
	}
	msg, err := js.Stream(ctx, "EV")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := msg.GetMsg(ctx, a1.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	if got := raw.Header.Get(jetstream.MsgIDHeader); got != a1.ID {
		t.Fatalf("stored Nats-Msg-Id = %q, want %q", got, a1.ID)
	}
}

func TestPublishBatch(t *testing.T) {
	t.Parallel()
	js, p := setup(t)
	ctx := context.Background()
	msgs := make([]publisher.Message, 2000)
	for i := range msgs {
		msgs[i] = publisher.Message{Subject: "ev.b", Data: []byte("x")}
	}
	msgs[10].ID = "fixed"
	msgs[1500].ID = "fixed" // published twice: stored once
	acks, err := p.PublishBatch(ctx, msgs)
	if err != nil {
		t.Fatal(err)
	}
	if len(acks) != len(msgs) || !acks[1500].Duplicate || acks[1500].Sequence != acks[10].Sequence {
		t.Fatalf("acks: len %d, [10]=%+v [1500]=%+v", len(acks), acks[10], acks[1500])
	}
	st, _ := js.Stream(ctx, "EV")
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1999 {
		t.Fatalf("stream holds %d messages, want 1999", info.State.Msgs)
	}
}

func TestPublishNoStreamGivesUpWithAttempts(t *testing.T) {
	t.Parallel()
	_, p := setup(t)
	_, err := p.Publish(context.Background(), publisher.Message{Subject: "nostream.x", Data: []byte("x")})
	if !errors.Is(err, jetstream.ErrNoStreamResponse) && !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("err = %v, want no responders", err)
	}
}

func TestCheckDuplicateWindow(t *testing.T) {
	t.Parallel()
	_, p := setup(t)
	if err := p.CheckDuplicateWindow(time.Second); !errors.Is(err, publisher.ErrDuplicateWindowTooShort) {
		t.Fatalf("err = %v", err)
	}
	if err := p.CheckDuplicateWindow(2 * time.Minute); err != nil {
		t.Fatalf("err = %v", err)
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	if _, err := publisher.New(nil, publisher.Config{Attempts: -1}); !errors.Is(err, publisher.ErrInvalidConfig) {
		t.Fatalf("err = %v", err)
	}
}

// Attempts counts requests: nats.go's own retry of no-responders is off, so
// the publisher's loop is the only one and three attempts are three requests.
func TestAttemptsAreRequests(t *testing.T) {
	t.Parallel()
	s := consumertest.RunServer(t)
	nc, js := consumertest.Connect(t, s)
	var requests atomic.Int32
	// Answers like a server with no stream there: a 503 status.
	sub, err := nc.Subscribe("nostream.x", func(m *nats.Msg) {
		requests.Add(1)
		reply := nats.NewMsg(m.Reply)
		reply.Header.Set("Status", "503")
		m.RespondMsg(reply) //nolint:errcheck // test responder
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe() //nolint:errcheck
	p, err := publisher.New(js, publisher.Config{Timeout: time.Second, RetryWait: time.Millisecond, Attempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Publish(context.Background(), publisher.Message{Subject: "nostream.x", Data: []byte(`{}`)})
	if !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("err = %v, want no responders", err)
	}
	if n := requests.Load(); n != 3 {
		t.Fatalf("%d requests for 3 attempts", n)
	}
}

// silentAsync is a publisher whose asynchronous publishes are never
// answered, as when the server holding them dies after storing them: the
// one fault here that a real server does not make on demand.
type silentAsync struct{ jetstream.Publisher }

type silentFuture struct {
	jetstream.PubAckFuture
	msg *nats.Msg
}

func (silentFuture) Ok() <-chan *jetstream.PubAck { return nil }
func (silentFuture) Err() <-chan error            { return nil }

func (s silentAsync) PublishMsgAsync(m *nats.Msg, _ ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	return silentFuture{msg: m}, nil
}

// A batch whose acks never come does not wait forever: past Timeout each
// is published again with its id, synchronously, and acked.
func TestPublishBatchDoesNotWaitForeverForAnAck(t *testing.T) {
	s := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, s)
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.>"}, Duplicates: time.Minute})
	p, err := publisher.New(silentAsync{js}, publisher.Config{Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var acks []publisher.Ack
	go func() {
		var err error
		acks, err = p.PublishBatch(context.Background(), []publisher.Message{{Subject: "ev.a", Data: []byte("1")}, {Subject: "ev.b", Data: []byte("2")}})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil || len(acks) != 2 || acks[0].Sequence != 1 || acks[1].Sequence != 2 {
			t.Fatalf("acks %+v, err %v", acks, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("PublishBatch still waits for acks that never come")
	}
}

// A message that must land in one stream is refused, and stored nowhere,
// when the server's stream for its subject is another one, by Publish and
// PublishBatch alike; into the expected stream it lands.
func TestExpectStreamRefusesAnotherStream(t *testing.T) {
	t.Parallel()
	js, p := setup(t)
	ctx := context.Background()
	m := publisher.Message{Subject: "ev.a", Data: []byte(`{}`), ExpectStream: "PAY"}
	if _, err := p.Publish(ctx, m); !errors.Is(err, publisher.ErrWrongStream) {
		t.Errorf("Publish into EV expecting PAY: %v, want ErrWrongStream", err)
	}
	if acks, err := p.PublishBatch(ctx, []publisher.Message{m}); !errors.Is(err, publisher.ErrWrongStream) || len(acks) != 0 {
		t.Errorf("PublishBatch into EV expecting PAY: %v %v, want ErrWrongStream and no ack", acks, err)
	}
	s, err := js.Stream(ctx, "EV")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := s.Info(ctx); err != nil || info.State.Msgs != 0 {
		t.Fatalf("EV holds %+v (%v), want nothing", info.State, err)
	}
	m.ExpectStream = "EV"
	if a, err := p.Publish(ctx, m); err != nil || a.Stream != "EV" {
		t.Fatalf("Publish expecting EV: %+v %v", a, err)
	}
	if acks, err := p.PublishBatch(ctx, []publisher.Message{m}); err != nil || len(acks) != 1 || acks[0].Stream != "EV" {
		t.Fatalf("PublishBatch expecting EV: %+v %v", acks, err)
	}
}
