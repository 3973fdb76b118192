package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats.go/jetstream"
)

// recorder is a slog handler that keeps the records it is given.
type recorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec.Clone())
	return nil
}

// raised returns the attributes of the info records that carry
// ack_wait_from, the consumer's report of a raised AckWait.
func (r *recorder) raised() []map[string]slog.Value {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]slog.Value
	for _, rec := range r.records {
		attrs := map[string]slog.Value{}
		rec.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value; return true })
		if _, ok := attrs["ack_wait_from"]; ok && rec.Level == slog.LevelInfo {
			out = append(out, attrs)
		}
	}
	return out
}

func (e *env) consumerConfig(t *testing.T, durable string) jetstream.ConsumerConfig {
	t.Helper()
	cons, err := e.js.Consumer(context.Background(), "EV", durable)
	if err != nil {
		t.Fatal(err)
	}
	return cons.CachedInfo().Config
}

// A consumer New creates, durable or replay, says in its description and
// metadata that jetledger made it, which version, from which plan, and why
// its MaxDeliver is unlimited; the caller's metadata goes along, the
// server's prefix is refused before anything is created.
func TestCreatedConsumersCarryMetadata(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	plan := ackwait.Plan{Deadline: 3 * time.Second, BatchSize: 10}
	md := map[string]string{consumer.MetadataVersion: "jetledger v9.9.9-test", "team": "payments"}
	if _, err := consumer.New(ctx, e.js, e.st, consumer.Config{Stream: "EV", Durable: "made", Handler: record, Plan: plan, Metadata: md}); err != nil {
		t.Fatal(err)
	}
	e.publish(t, "a", "x")
	replay, err := consumer.New(ctx, e.js, e.st, consumer.Config{Stream: "EV", Durable: "made", Handler: record, Plan: plan, Metadata: md,
		Replay: &consumer.ReplayFrom{}})
	if err != nil {
		t.Fatal(err)
	}
	replayInfo, err := replay.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]jetstream.ConsumerConfig{"durable": e.consumerConfig(t, "made"), "replay": replayInfo.Config} {
		want := map[string]string{
			consumer.MetadataCreatedBy: "jetledger",
			consumer.MetadataVersion:   "jetledger v9.9.9-test",
			consumer.MetadataPlan:      consumer.PlanMetadata(plan),
			"team":                     "payments",
		}
		for k, v := range want {
			if cfg.Metadata[k] != v {
				t.Errorf("%s: metadata %s = %q, want %q (all: %v)", name, k, cfg.Metadata[k], v, cfg.Metadata)
			}
		}
		if cfg.Metadata[consumer.MetadataMaxDeliver] == "" || cfg.MaxDeliver != -1 || cfg.Description == "" {
			t.Errorf("%s: max_deliver %q, MaxDeliver %d, description %q", name, cfg.Metadata[consumer.MetadataMaxDeliver], cfg.MaxDeliver, cfg.Description)
		}
		if !consumer.MadeByJetledger(cfg) {
			t.Errorf("%s: not recognised as jetledger's", name)
		}
	}
	// The plan's value names every part of the AckWait.
	p := plan.WithDefaults()
	for _, part := range []string{p.AckWait().String(), p.Deadline.String(), p.BufferWait.String(), p.CommitMargin.String(),
		p.AckMargin.String(), fmt.Sprint(p.BatchSize)} {
		if !strings.Contains(consumer.PlanMetadata(plan), part) {
			t.Errorf("plan metadata %q lacks %s", consumer.PlanMetadata(plan), part)
		}
	}

	_, err = consumer.New(ctx, e.js, e.st, consumer.Config{Stream: "EV", Durable: "server-key", Handler: record,
		Metadata: map[string]string{"_nats.ver": "1"}})
	if !errors.Is(err, consumer.ErrInvalidConfig) {
		t.Fatalf("_nats. key: err %v, want ErrInvalidConfig", err)
	}
	if _, err := e.js.Consumer(ctx, "EV", "server-key"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("a refused config created its durable: %v", err)
	}
}

// A durable jetledger created gets a longer AckWait, and room for a whole
// batch, when the plan grows (batch 10 → 500, deadline 1s → 3s; batch →
// 2000), with an info record of both values; it then consumes. A smaller
// plan never lowers them.
func TestRaisesItsOwnDurableForALongerPlan(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	newConsumer := func(plan ackwait.Plan, log *slog.Logger) (*consumer.Consumer, error) {
		return consumer.New(ctx, e.js, e.st, consumer.Config{Stream: "EV", Durable: "own", Handler: record, Plan: plan,
			FetchWait: 50 * time.Millisecond, Logger: log})
	}
	small := ackwait.Plan{Deadline: time.Second, BatchSize: 10}
	if _, err := newConsumer(small, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	created := e.consumerConfig(t, "own")
	if created.AckWait != small.AckWait() {
		t.Fatalf("created with AckWait %s, want %s", created.AckWait, small.AckWait())
	}

	large := ackwait.Plan{Deadline: 3 * time.Second, BatchSize: 500}
	rec := &recorder{}
	c, err := newConsumer(large, slog.New(rec))
	if err != nil {
		t.Fatalf("own durable refused for a longer plan: %v", err)
	}
	got := e.consumerConfig(t, "own")
	if got.AckWait != large.AckWait() || got.MaxAckPending != created.MaxAckPending {
		t.Fatalf("after the longer plan: AckWait %s, MaxAckPending %d; want %s, %d", got.AckWait, got.MaxAckPending, large.AckWait(), created.MaxAckPending)
	}
	if got.Metadata[consumer.MetadataPlan] != consumer.PlanMetadata(large) || got.Metadata[consumer.MetadataCreatedBy] != "jetledger" ||
		got.Metadata[consumer.MetadataMaxDeliver] != created.Metadata[consumer.MetadataMaxDeliver] {
		t.Fatalf("metadata after the raise: %v", got.Metadata)
	}
	if got.MaxDeliver != created.MaxDeliver || got.Description != created.Description || got.DeliverPolicy != created.DeliverPolicy {
		t.Fatalf("the raise changed more than AckWait: %+v, was %+v", got, created)
	}
	logged := rec.raised()
	if len(logged) != 1 || logged[0]["ack_wait_from"].Duration() != small.AckWait() || logged[0]["ack_wait_to"].Duration() != large.AckWait() {
		t.Fatalf("info records of the raise: %v", logged)
	}

	// It consumes with the raised durable.
	consumertest.RunConsumer(t, c)
	for _, id := range []string{"a", "b", "c"} {
		e.publish(t, id, id)
	}
	e.waitAcked(t, "own", 3)
	if n := e.count(t, `SELECT count(*) FROM seen`); n != 3 {
		t.Fatalf("applied %d, want 3", n)
	}

	// A batch past MaxAckPending raises it as well.
	huge := ackwait.Plan{Deadline: 3 * time.Second, BatchSize: 2000}
	if _, err := newConsumer(huge, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("own durable refused for a larger batch: %v", err)
	}
	if got := e.consumerConfig(t, "own"); got.MaxAckPending < huge.BatchSize || got.AckWait != huge.AckWait() {
		t.Fatalf("after batch %d: MaxAckPending %d, AckWait %s", huge.BatchSize, got.MaxAckPending, got.AckWait)
	}

	// A smaller plan lowers nothing.
	before := e.consumerConfig(t, "own")
	rec = &recorder{}
	if _, err := newConsumer(small, slog.New(rec)); err != nil {
		t.Fatal(err)
	}
	after := e.consumerConfig(t, "own")
	if after.AckWait != before.AckWait || after.MaxAckPending != before.MaxAckPending || after.Metadata[consumer.MetadataPlan] != before.Metadata[consumer.MetadataPlan] {
		t.Fatalf("a smaller plan changed the durable: AckWait %s → %s, MaxAckPending %d → %d", before.AckWait, after.AckWait, before.MaxAckPending, after.MaxAckPending)
	}
	if len(rec.raised()) != 0 {
		t.Fatalf("a smaller plan logged a raise: %v", rec.raised())
	}
}

// A durable jetledger did not create (by hand, or by a release without the
// metadata) is refused, not edited: its AckWait and MaxAckPending stay.
func TestLeavesOtherDurablesAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	tests := []struct {
		name    string
		cfg     jetstream.ConsumerConfig
		wantErr error
	}{
		{name: "short AckWait", wantErr: ackwait.ErrAckWaitTooShort,
			cfg: jetstream.ConsumerConfig{Durable: "hand", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Second}},
		{name: "small MaxAckPending", wantErr: ackwait.ErrMaxAckPending,
			cfg: jetstream.ConsumerConfig{Durable: "narrow", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Hour, MaxAckPending: 5}},
		{name: "other metadata", wantErr: ackwait.ErrAckWaitTooShort,
			cfg: jetstream.ConsumerConfig{Durable: "tagged", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Second,
				Metadata: map[string]string{"owner": "ops"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := e.js.CreateConsumer(ctx, "EV", tt.cfg); err != nil {
				t.Fatal(err)
			}
			_, err := consumer.New(ctx, e.js, e.st, consumer.Config{Stream: "EV", Durable: tt.cfg.Durable, Handler: record})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			got := e.consumerConfig(t, tt.cfg.Durable)
			if got.AckWait != tt.cfg.AckWait || (tt.cfg.MaxAckPending > 0 && got.MaxAckPending != tt.cfg.MaxAckPending) {
				t.Fatalf("durable changed: AckWait %s, MaxAckPending %d", got.AckWait, got.MaxAckPending)
			}
		})
	}
}

// When the server will not take the raise (here the stream caps
// MaxAckPending at 1000 and batch 2000 needs more), the durable is refused
// as anyone's would be, with the fix for a person, and a warning says why.
func TestRefusesItsOwnDurableWhenTheRaiseIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	js := e.js
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "CAPPED", Subjects: []string{"capped.>"},
		ConsumerLimits: jetstream.StreamConsumerLimits{MaxAckPending: 1000}})
	ctx := context.Background()
	newConsumer := func(plan ackwait.Plan, log *slog.Logger) error {
		_, err := consumer.New(ctx, js, e.st, consumer.Config{Stream: "CAPPED", Handler: record, Plan: plan, Logger: log})
		return err
	}
	if err := newConsumer(ackwait.Plan{BatchSize: 100}, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	// The same AckWait (commit 3s + 2000 x 1ms against 5s + 100 x 1ms): only
	// MaxAckPending must grow.
	if err := newConsumer(ackwait.Plan{BatchSize: 2000, CommitMargin: 3 * time.Second}, slog.New(rec)); !errors.Is(err, ackwait.ErrMaxAckPending) {
		t.Fatalf("err = %v, want ErrMaxAckPending", err)
	}
	warned := 0
	for _, r := range rec.records {
		if r.Level == slog.LevelWarn {
			warned++
		}
	}
	cons, err := js.Consumer(ctx, "CAPPED", consumer.DurableDefault)
	if err != nil {
		t.Fatal(err)
	}
	if got := cons.CachedInfo().Config.MaxAckPending; got != 1000 || warned != 1 {
		t.Fatalf("MaxAckPending %d, %d warnings; want 1000 and one warning", got, warned)
	}
}
