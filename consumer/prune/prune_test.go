package prune_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/prune"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A Pruner is refused before any I/O when a required field is missing or a
// duration negative; Run needs a positive Interval.
func TestPrunerConfigIsValidated(t *testing.T) {
	t.Parallel()
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	ok := prune.Pruner{Ledger: st, JetStream: js, Stream: "S", Durable: "d"}
	for _, tc := range []struct {
		name   string
		change func(*prune.Pruner)
	}{
		{"no ledger", func(p *prune.Pruner) { p.Ledger = nil }},
		{"no stream", func(p *prune.Pruner) { p.Stream = "" }},
		{"no durable", func(p *prune.Pruner) { p.Durable = "" }},
		{"negative retention", func(p *prune.Pruner) { p.Retention = -time.Second }},
	} {
		p := ok
		tc.change(&p)
		if _, err := p.Options(t.Context()); !errors.Is(err, prune.ErrInvalidConfig) {
			t.Errorf("%s: Options = %v, want ErrInvalidConfig", tc.name, err)
		}
	}
	if err := ok.Run(t.Context()); !errors.Is(err, prune.ErrInvalidConfig) {
		t.Errorf("Run without Interval = %v, want ErrInvalidConfig", err)
	}
}

// Run prunes at each tick, with the bounds read then, and returns when ctx
// ends.
func TestRunPrunesUntilCancelled(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Duplicates: time.Second})
	var now atomic.Int64
	now.Store(time.Now().Add(-48 * time.Hour).UnixNano())
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{Now: func() time.Time { return time.Unix(0, now.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	// A row of a message the stream no longer holds, applied two days ago.
	if _, err := js.Publish(t.Context(), "s.x", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ApplyBatch(t.Context(), []ledger.Delivery{{MessageID: "a", Stream: "S", Sequence: 1, Subject: "s.x", Data: []byte("x")}},
		func(context.Context, *ledger.Tx, ledger.Delivery) error { return nil }, ledger.Budget{}); err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(t.Context(), "S")
	if err == nil {
		err = s.Purge(t.Context())
	}
	if err != nil {
		t.Fatal(err)
	}
	now.Store(time.Now().UnixNano())
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	p := &prune.Pruner{Ledger: st, JetStream: js, Stream: "S", Durable: "d", Retention: time.Hour, Interval: 10 * time.Millisecond}
	go func() { done <- p.Run(ctx) }()
	consumertest.Eventually(t, 10*time.Second, "the row pruned", func() bool {
		s, err := st.Stats(t.Context())
		return err == nil && s.Processed == 0
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v after cancel, want nil", err)
	}
}

// A zero Retention is ledger.RetentionDefault in Check's comparison as in
// the prune itself: it passes a stream whose duplicate window is shorter
// than a week and is refused by one whose window is longer, and the options
// carry the defaults, not zeros. Before, Check compared the zero as given
// and refused every stream with a duplicate window.
func TestZeroRetentionIsTheDefault(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, tt := range []struct {
		name      string
		window    time.Duration
		retention time.Duration
		want      time.Duration // the options' Retention
		wantErr   error
	}{
		{name: "zero, window 2m", window: 2 * time.Minute, want: ledger.RetentionDefault},
		{name: "zero, window 8d", window: 8 * 24 * time.Hour, want: ledger.RetentionDefault, wantErr: prune.ErrRetentionShort},
		{name: "1m, window 2m", window: 2 * time.Minute, retention: time.Minute, want: time.Minute, wantErr: prune.ErrRetentionShort},
		{name: "9d, window 8d", window: 8 * 24 * time.Hour, retention: 9 * 24 * time.Hour, want: 9 * 24 * time.Hour},
	} {
		name := fmt.Sprintf("S%d", tt.window/time.Minute)
		if _, err := js.CreateOrUpdateStream(t.Context(), jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Duplicates: tt.window}); err != nil {
			t.Fatal(err)
		}
		p := prune.Pruner{Ledger: st, JetStream: js, Stream: name, Durable: "d", Retention: tt.retention}
		o, err := p.Check(t.Context())
		if !errors.Is(err, tt.wantErr) || o.Retention != tt.want || o.OutboxRetention != ledger.OutboxRetentionDefault {
			t.Errorf("%s: Check = %v (Retention %s, OutboxRetention %s), want %v (Retention %s, OutboxRetention %s)",
				tt.name, err, o.Retention, o.OutboxRetention, tt.wantErr, tt.want, ledger.OutboxRetentionDefault)
		}
	}
}

// The refusal says Retention in the caller's words, and is
// ErrRetentionShort.
func TestRetentionErrorSaysTheCallersName(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		names map[string]string
		want  string
	}{
		{"a Go program's", nil, "Retention 1m0s is shorter than stream S's duplicate window 2m0s: a republished id could be applied twice"},
		{"a flag", map[string]string{"Retention": "--retention"}, "--retention 1m0s is shorter than stream S's duplicate window 2m0s: a republished id could be applied twice"},
	} {
		var err error = &prune.RetentionError{Stream: "S", Retention: time.Minute, DuplicateWindow: 2 * time.Minute, Names: tt.names}
		if !errors.Is(err, prune.ErrRetentionShort) || err.Error() != tt.want {
			t.Errorf("%s: %q (ErrRetentionShort %t), want %q", tt.name, err, errors.Is(err, prune.ErrRetentionShort), tt.want)
		}
	}
}

// A partition's durable is only handed its own subjects: a message of
// another partition past its ack floor does not hold its retention back.
// Before, the first message past the floor on any subject did, and a
// drained partition's rows stayed behind the others' backlog. Its own
// unhandled message still does.
func TestAnotherPartitionsBacklogDoesNotHoldRowsBack(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "P", Subjects: []string{"p.>"}}); err != nil {
		t.Fatal(err)
	}
	pub := func(subject string) {
		if _, err := js.Publish(ctx, subject, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	pub("p.0")
	pub("p.0")
	pub("p.1") // partition 1's, never handed to d0
	c, err := js.CreateOrUpdateConsumer(ctx, "P", jetstream.ConsumerConfig{Durable: "d0", FilterSubject: "p.0", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	drain := func(n int) {
		msgs, err := c.Fetch(n, jetstream.FetchMaxWait(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range msgs.Messages() {
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
			n--
		}
		if n != 0 {
			t.Fatalf("%d messages of p.0 not fetched", n)
		}
	}
	drain(2)
	o, err := prune.Options(ctx, js, st, "P", "d0")
	if err != nil || !o.Unconsumed.IsZero() {
		t.Fatalf("a drained partition beside another's backlog: Unconsumed %v (%v), want none", o.Unconsumed, err)
	}
	pub("p.0")
	o, err = prune.Options(ctx, js, st, "P", "d0")
	if err != nil || o.Unconsumed.IsZero() {
		t.Fatalf("its own unhandled message: Unconsumed %v (%v), want its time", o.Unconsumed, err)
	}
}
