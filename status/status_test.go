package status_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/partition"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/status"
	"github.com/nats-io/nats.go/jetstream"
)

func openLedger(tb testing.TB, path string) *ledger.Store {
	tb.Helper()
	st, err := ledger.Open(path, ledger.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

func ctx(tb testing.TB) context.Context {
	tb.Helper()
	c, cancel := context.WithTimeout(tb.Context(), 10*time.Second)
	tb.Cleanup(cancel)
	return c
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	st := openLedger(t, filepath.Join(t.TempDir(), "l.db"))
	tests := []struct {
		name    string
		js      status.JetStream
		st      *ledger.Store
		cfg     status.Config
		wantErr error
	}{
		{name: "ledger alone needs no names", st: st},
		{name: "nothing at all", cfg: status.Config{}},
		{name: "server without a stream", js: js, cfg: status.Config{Durable: "d"}, wantErr: status.ErrInvalidConfig},
		{name: "server without a durable", js: js, cfg: status.Config{Stream: "S"}, wantErr: status.ErrInvalidConfig},
		{name: "partitions without DB", cfg: status.Config{Partitions: []int{0}}, wantErr: status.ErrInvalidConfig},
		{name: "partitions beside a ledger", st: st, cfg: status.Config{DB: "x.db", Partitions: []int{0}}, wantErr: status.ErrInvalidConfig},
		{name: "partition twice", cfg: status.Config{DB: "x.db", Partitions: []int{1, 1}}, wantErr: status.ErrInvalidConfig},
		{name: "negative partition", cfg: status.Config{DB: "x.db", Partitions: []int{-1}}, wantErr: status.ErrInvalidConfig},
		{name: "plan out of range", st: st, cfg: status.Config{Plan: ackwait.Plan{Deadline: -time.Second}}, wantErr: status.ErrInvalidConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := status.Read(ctx(t), tt.js, tt.st, tt.cfg)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Read: %v, want %v", err, tt.wantErr)
			}
		})
	}
	if _, err := status.Check(ctx(t), nil, status.Config{Stream: "S", Durable: "d"}); !errors.Is(err, status.ErrInvalidConfig) {
		t.Errorf("Check without a JetStream: %v, want ErrInvalidConfig", err)
	}
}

// The ledger alone: its stats and its outbox, nothing of a server.
func TestReadLedgerAlone(t *testing.T) {
	t.Parallel()
	st := openLedger(t, filepath.Join(t.TempDir(), "l.db"))
	rep, err := status.Read(ctx(t), nil, st, status.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Ledger == nil || rep.Ledger.Path != st.Path() || rep.Outbox == nil || len(rep.Problems) != 0 {
		t.Fatalf("ledger alone: %+v", rep)
	}
	if rep.Stream != nil || rep.Consumer != nil || rep.Partitions != nil {
		t.Fatalf("ledger alone read a server: %+v", rep)
	}
}

// A stream not found is one problem, not two: its consumer is not looked
// up. A durable not found is one problem too.
func TestReadNotFound(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	rep, err := status.Read(ctx(t), js, nil, status.Config{Stream: "NONE", Durable: "d"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 1 || !errors.Is(rep.Problems[0], jetstream.ErrStreamNotFound) || rep.Stream != nil {
		t.Fatalf("stream not found: %q", rep.Problems)
	}
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "PAY", Subjects: []string{"pay.>"}})
	rep, err = status.Read(ctx(t), js, nil, status.Config{Stream: "PAY", Durable: "d"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 1 || !errors.Is(rep.Problems[0], jetstream.ErrConsumerNotFound) || rep.Stream == nil || rep.Consumer != nil {
		t.Fatalf("durable not found: %+v %q", rep.Stream, rep.Problems)
	}
}

// Check says whether the plan holds, with the plan's refusal when not, and
// a consumer not found as jetstream's error.
func TestCheck(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	s := consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "PAY", Subjects: []string{"pay.>"}})
	plan := ackwait.Plan{Deadline: time.Second, BatchSize: 10}
	for _, c := range []jetstream.ConsumerConfig{
		{Durable: "safe", AckPolicy: jetstream.AckExplicitPolicy, AckWait: plan.AckWait()},
		{Durable: "short", AckPolicy: jetstream.AckExplicitPolicy, AckWait: plan.AckWait() - time.Millisecond},
		{Durable: "few", AckPolicy: jetstream.AckExplicitPolicy, AckWait: plan.AckWait(), MaxAckPending: 5},
	} {
		if _, err := s.CreateConsumer(ctx(t), c); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		durable string
		safe    bool
		wantErr error // of the lookup
		refusal error
	}{
		{durable: "safe", safe: true},
		{durable: "short", refusal: ackwait.ErrAckWaitTooShort},
		{durable: "few", refusal: ackwait.ErrMaxAckPending},
		{durable: "none", wantErr: jetstream.ErrConsumerNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.durable, func(t *testing.T) {
			c, err := status.Check(ctx(t), js, status.Config{Stream: "PAY", Durable: tt.durable, Plan: plan})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Check: %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if c.Safe != tt.safe || !errors.Is(c.Refusal, tt.refusal) || (tt.refusal == nil) != (c.Refusal == nil) ||
				c.PlanAckWait != plan.AckWait() || c.Name != tt.durable {
				t.Fatalf("Check: %+v, want safe %t, refusal %v", c, tt.safe, tt.refusal)
			}
		})
	}
	if _, err := status.Check(ctx(t), js, status.Config{Stream: "NONE", Durable: "d"}); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("Check of a stream not found: %v", err)
	}
	// The refusal says the fix in Names' words (a *consumer.PlanError),
	// and one it has no fix for names the consumer, as consumer.New does.
	if _, err := s.CreateConsumer(ctx(t), jetstream.ConsumerConfig{Durable: "noacks", AckPolicy: jetstream.AckNonePolicy}); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{"Plan.BatchSize": "--batch"}
	for _, tt := range []struct {
		durable string
		plan    bool
		want    string
	}{{"few", true, "consumer PAY/few: its MaxAckPending is below --batch 10; raise it: nats consumer edit PAY few --max-pending 10; or lower --batch"},
		{"noacks", false, "consumer PAY/noacks: "}} {
		c, err := status.Check(ctx(t), js, status.Config{Stream: "PAY", Durable: tt.durable, Plan: plan, Names: names})
		if err != nil || c.Refusal == nil || errors.As(c.Refusal, new(*consumer.PlanError)) != tt.plan || !strings.HasPrefix(c.Refusal.Error(), tt.want) {
			t.Errorf("Check %s with Names: %v, %v; want a refusal starting %q (a *consumer.PlanError: %t)", tt.durable, c, err, tt.want, tt.plan)
		}
	}
}

// Every partition is read with its durable <durable>-p<i>; the ledgers of
// the partitions here are summed; a ledger of a partition the stream does
// not have and one that cannot be read are problems.
func TestReadPartitions(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	s := consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "PAY", Subjects: []string{"pay.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "pay.*", Destination: "{{partition(2,1)}}.pay.{{wildcard(1)}}"}})
	if _, err := s.CreateConsumer(ctx(t), jetstream.ConsumerConfig{Durable: partition.Durable("jetledger", 1),
		AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: partition.Filter(1)}); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "pay.db")
	for _, i := range []int{1, 3} {
		openLedger(t, partition.Ledger(db, i))
	}
	if got := status.LocalPartitions(db); !slices.Equal(got, []int{1, 3}) {
		t.Fatalf("LocalPartitions = %v, want [1 3]", got)
	}
	if got := status.LocalPartitions(partition.Ledger(db, 1)); got != nil {
		t.Fatalf("LocalPartitions of a ledger that exists = %v, want none: it is the one to read", got)
	}
	// Named from a partition's durable, as status is when it reads the
	// names from a partition's ledger.
	cfg := status.Config{Stream: "PAY", Durable: partition.Durable("jetledger", 1), DB: db, Partitions: []int{1, 3}}
	rep, err := status.Read(ctx(t), js, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Partitions) != 2 || rep.Ledger == nil || rep.Ledger.Path != "" || rep.Consumer != nil {
		t.Fatalf("partitions: %+v, ledger %+v", rep.Partitions, rep.Ledger)
	}
	p0, p1 := rep.Partitions[0], rep.Partitions[1]
	if p0.Durable != "jetledger-p0" || p0.Consumer || p0.Ledger != "" ||
		p1.Durable != "jetledger-p1" || !p1.Consumer || p1.Ledger != partition.Ledger(db, 1) {
		t.Fatalf("partitions: %+v", rep.Partitions)
	}
	var stray *status.StrayLedgerError
	if len(rep.Problems) != 1 || !errors.As(rep.Problems[0], &stray) || stray.Partition != 3 || stray.Partitions != 2 {
		t.Fatalf("problems %q, want partition 3's ledger a stray", rep.Problems)
	}

	if err := os.WriteFile(partition.Ledger(db, 1), []byte("not a database, but long enough to be read as one's header......"), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err = status.Read(ctx(t), nil, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 1 || rep.Partitions[0].Ledger != partition.Ledger(db, 1) {
		t.Fatalf("partition 1's ledger unreadable: %q, %+v", rep.Problems, rep.Partitions)
	}
}
