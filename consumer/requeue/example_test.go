package requeue_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/jetledger/jetledger/consumer/requeue"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A message the consumer gave up on is requeued, once its cause is fixed,
// into the stream it came from: the stream stores the copy after the
// original and the dead letter goes.
func ExampleRequeue() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir, err := os.MkdirTemp("", "requeue-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	srv, err := server.NewServer(&server.Options{Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		panic(err)
	}
	go srv.Start()
	defer srv.WaitForShutdown()
	defer srv.Shutdown()
	if !srv.ReadyForConnections(10 * time.Second) {
		panic("nats-server not ready")
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		panic(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		panic(err)
	}
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PAY", Subjects: []string{"pay.*"}, Duplicates: 100 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	// The original, and the dead letter the consumer recorded for it.
	ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: "pay.alice", Data: []byte(`{"amount":1}`), Header: nats.Header{jetstream.MsgIDHeader: {"evt-1"}}})
	if err != nil {
		panic(err)
	}
	st, err := ledger.Open(filepath.Join(dir, "pay.db"), ledger.Config{})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	if err := st.RecordDeadLetters(ctx, []ledger.DeadLetter{{MessageID: "evt-1", Stream: "PAY", Sequence: ack.Sequence,
		Subject: "pay.alice", Payload: []byte(`{"amount":1}`), Reason: "no such account", Deliveries: 5}}); err != nil {
		panic(err)
	}
	dls, err := st.DeadLetters(ctx, 0)
	if err != nil {
		panic(err)
	}

	// Until PAY's duplicate window has passed, PAY would drop the copy.
	var res requeue.Result
	for tick := time.Tick(50 * time.Millisecond); ; <-tick {
		res, err = requeue.Requeue(ctx, js, st, dls[0], requeue.Config{Logger: slog.New(slog.DiscardHandler)})
		if !errors.Is(err, requeue.ErrStillInWindow) {
			break
		}
	}
	if err != nil {
		panic(err)
	}
	left, err := st.DeadLetters(ctx, 0)
	if err != nil {
		panic(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Printf("requeued as %s seq %d; %d messages in PAY, %d dead letters left\n", res.Via.Stream, res.Via.Sequence, info.State.Msgs, len(left))
	// Output:
	// requeued as PAY seq 2; 2 messages in PAY, 0 dead letters left
}
