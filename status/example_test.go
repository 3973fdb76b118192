package status_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/status"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// embedded starts a JetStream server on a random port with its store in
// dir; stop shuts it down.
func embedded(dir string) (url string, stop func()) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		log.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		log.Fatal("server not ready")
	}
	return s.ClientURL(), func() { s.Shutdown(); s.WaitForShutdown() }
}

func ExampleRead() {
	dir, err := os.MkdirTemp("", "status")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	url, stop := embedded(dir)
	defer stop()
	nc, err := nats.Connect(url)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A stream and a durable whose AckWait is far below what the plan needs.
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PAY", Subjects: []string{"pay.>"}})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "jetledger", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Second}); err != nil {
		log.Fatal(err)
	}
	if _, err := js.Publish(ctx, "pay.1", []byte(`{}`)); err != nil {
		log.Fatal(err)
	}
	st, err := ledger.Open(filepath.Join(dir, "pay.db"), ledger.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	rep, err := status.Read(ctx, js, st, status.Config{Stream: "PAY", Durable: "jetledger"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("stream", rep.Stream.Name, rep.Stream.LastSeq, "messages", rep.Stream.Messages)
	fmt.Println("consumer", rep.Consumer.Name, rep.Consumer.AckWait, "needs", rep.Consumer.PlanAckWait, "safe", rep.Consumer.Safe, "pending", rep.Consumer.Pending)
	fmt.Println("ledger rows", rep.Ledger.Processed, "review", rep.Outbox[ledger.StatusReview])
	for _, p := range rep.Problems {
		fmt.Println("problem: AckWait too short:", errors.Is(p, ackwait.ErrAckWaitTooShort))
	}
	// Output:
	// stream PAY 1 messages 1
	// consumer jetledger 1s needs 19.1s safe false pending 1
	// ledger rows 0 review 0
	// problem: AckWait too short: true
}

func ExampleReport_WriteText() {
	rep := status.Report{
		Stream:   &status.Stream{Name: "PAY", FirstSeq: 1, LastSeq: 120, Messages: 120, DuplicateWindow: 2 * time.Minute},
		Consumer: &status.Consumer{Name: "jetledger", AckWait: 30 * time.Second, PlanAckWait: 19100 * time.Millisecond, Safe: true, Pending: 20, AckPending: 100, AckFloorSeq: 100},
		Ledger:   &ledger.Stats{Path: "/var/lib/jetledger/pay.db", Processed: 100, SizeBytes: 81920, Oldest: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), DeadLetters: 1},
		Outbox:   map[ledger.Status]int64{ledger.StatusSent: 97, ledger.StatusReview: 3},
	}
	if err := rep.WriteText(os.Stdout); err != nil {
		log.Fatal(err)
	}
	status.WriteField(os.Stdout, "PROBLEM", "a problem said in the caller's terms, wrapped under its label when it is longer than a line of status.TextWidth columns")
	// Output:
	// stream        PAY: seq 1..120, 120 messages, duplicate window 2m0s
	// consumer      jetledger: AckWait 30s (plan needs 19.1s: ok)
	//               20 pending, 100 waiting for ack, 0 redelivered, acked through seq 100
	// ledger        /var/lib/jetledger/pay.db: 100 rows, 81920 bytes, oldest 2026-12-01T09:00:00Z
	// dead letters  1
	// conflicts     0
	// outbox        queued 0, sending 0, sent 97, failed 0, review 3, cancelled 0, suppressed 0
	// PROBLEM       a problem said in the caller's terms, wrapped under its label when it is longer than a
	//               line of status.TextWidth columns
}
