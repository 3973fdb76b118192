package partition_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/jetledger/jetledger/consumer/partition"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// PublishSubject traces a stored subject back through the stream's mapping,
// checked by the server's own transform: republished, it is stored as it was.
func TestPublishSubjectUndoesTheMapping(t *testing.T) {
	t.Parallel()
	// The mappings run --partitions makes (Transform, through service.Partitions).
	tr := func(src, dest string) jetstream.StreamConfig {
		return jetstream.StreamConfig{Name: "S", Subjects: []string{src},
			SubjectTransform: &jetstream.SubjectTransformConfig{Source: src, Destination: dest}}
	}
	partitioned := tr("pay.*", "{{partition(4,1)}}.pay.{{wildcard(1)}}")
	tests := []struct {
		name    string
		cfg     jetstream.StreamConfig
		stored  string
		want    string
		wantErr error
	}{
		{"no mapping", jetstream.StreamConfig{Subjects: []string{"pay.*"}}, "pay.alice", "pay.alice", nil},
		{"partition", partitioned, "", "pay.alice", nil},
		{"partition, key 2 of 2, '>' tail", tr("orders.*.*.>", "{{partition(8,2)}}.orders.{{wildcard(1)}}.{{wildcard(2)}}.>"), "", "orders.eu.bob.created.v1", nil},
		{"another subject of the stream, not mapped", jetstream.StreamConfig{Subjects: []string{"pay.*", "audit.>"},
			SubjectTransform: partitioned.SubjectTransform}, "audit.x", "audit.x", nil},
		{"another partition's number", partitioned, "9.pay.alice", "", partition.ErrNoInverse},
		{"not the mapping's shape", partitioned, "1.pay.alice.extra", "", partition.ErrNoInverse},
		{"a mapping that drops the key", jetstream.StreamConfig{Subjects: []string{"pay.*"},
			SubjectTransform: &jetstream.SubjectTransformConfig{Source: "pay.*", Destination: "all.pay"}}, "all.pay", "", partition.ErrNoInverse},
		{"a mapping function it cannot undo", jetstream.StreamConfig{Subjects: []string{"pay.*"},
			SubjectTransform: &jetstream.SubjectTransformConfig{Source: "pay.*", Destination: "{{split(1,-)}}.pay"}}, "a.pay", "", partition.ErrNoInverse},
	}
	for _, tc := range tests {
		stored := tc.stored
		if stored == "" {
			// What the server stores the subject as.
			st, err := server.NewSubjectTransform(tc.cfg.SubjectTransform.Source, tc.cfg.SubjectTransform.Destination)
			if err != nil {
				t.Fatal(err)
			}
			if stored, err = st.Match(tc.want); err != nil {
				t.Fatal(err)
			}
		}
		got, err := partition.PublishSubject(tc.cfg, stored)
		if !errors.Is(err, tc.wantErr) || got != tc.want {
			t.Errorf("%s: partition.PublishSubject(%s) = %q, %v; want %q, %v", tc.name, stored, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestNames(t *testing.T) {
	t.Parallel()
	tr := &jetstream.SubjectTransformConfig{Source: "orders.*.*.>", Destination: "{{partition(8,2)}}.orders.{{wildcard(1)}}.{{wildcard(2)}}.>"}
	if n := partition.Count(jetstream.StreamConfig{SubjectTransform: tr}); n != 8 {
		t.Fatalf("Count = %d, want 8", n)
	}
	if n := partition.Count(jetstream.StreamConfig{}); n != 0 {
		t.Fatalf("an unpartitioned stream has %d partitions", n)
	}
	for db, want := range map[string]string{"ledger.db": "ledger-p3.db", "/var/lib/j/pay.sqlite": "/var/lib/j/pay-p3.sqlite", "ledger": "ledger-p3"} {
		if got := partition.Ledger(db, 3); got != want {
			t.Errorf("Ledger(%s) = %s, want %s", db, got, want)
		}
	}
	if d, f := partition.Durable("jetledger", 2), partition.Filter(2); d != "jetledger-p2" || f != "2.>" {
		t.Errorf("Durable, Filter = %s, %s", d, f)
	}
	if got := partition.Here([]int{2, 0}, 4); !slices.Equal(got, []int{0, 2}) {
		t.Errorf("Here named = %v", got)
	}
	if got := partition.Here(nil, 3); !slices.Equal(got, []int{0, 1, 2}) {
		t.Errorf("Here all = %v", got)
	}
}

// The first partition to fail stops the others; each error names its
// partition.
func TestRunStopsAllOnTheFirstFailure(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	var stopped atomic.Int32
	err := partition.Run(context.Background(), partition.Config{Partitions: []int{0, 1, 2}, Start: func(ctx context.Context, i int) error {
		if i == 1 {
			return boom
		}
		<-ctx.Done()
		stopped.Add(1)
		return nil
	}})
	if !errors.Is(err, boom) || err.Error() != "partition 1: boom" || stopped.Load() != 2 {
		t.Fatalf("Run = %v, %d stopped; want partition 1: boom and 2 stopped", err, stopped.Load())
	}
}

func TestRunValidates(t *testing.T) {
	t.Parallel()
	start := func(context.Context, int) error { return nil }
	for _, tc := range []struct {
		name string
		cfg  partition.Config
	}{
		{"no start", partition.Config{Partitions: []int{0}}},
		{"no partitions", partition.Config{Start: start}},
		{"negative", partition.Config{Partitions: []int{-1}, Start: start}},
		{"twice", partition.Config{Partitions: []int{1, 1}, Start: start}},
	} {
		if err := partition.Run(context.Background(), tc.cfg); !errors.Is(err, partition.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", tc.name, err)
		}
	}
}

func TestOfDurable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		durable string
		want    int
		ok      bool
	}{
		{"jetledger-p2", 2, true}, {"a-p1-p0", 0, true}, {"jetledger-p4", 0, false}, {"jetledger", 0, false},
		{"jetledger-p", 0, false}, {"jetledger-px", 0, false}, {"jetledger-p99999999999999999999", 0, false},
	} {
		if i, ok := partition.OfDurable(tc.durable, 4); ok != tc.ok || (ok && i != tc.want) {
			t.Errorf("OfDurable(%s, 4) = %d, %v; want %d, %v", tc.durable, i, ok, tc.want, tc.ok)
		}
	}
}
