package metrics_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/metrics"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

type rows map[ledger.Status]int64

func (r rows) OutboxCounts(context.Context) (map[ledger.Status]int64, error) { return r, nil }

type attention []ledger.Attention

func (a attention) Attention(context.Context) ([]ledger.Attention, error) { return a, nil }

type lag jetstream.ConsumerInfo

func (l lag) Info(context.Context) (*jetstream.ConsumerInfo, error) {
	i := jetstream.ConsumerInfo(l)
	return &i, nil
}

type sends outbox.Counts

func (s sends) Counts() outbox.Counts { return outbox.Counts(s) }

func TestCollectorReadsAtScrape(t *testing.T) {
	t.Parallel()
	needs := attention{{Kind: ledger.AttentionReview, Count: 2, Oldest: time.Now().Add(-time.Hour)}, {Kind: ledger.AttentionConflict}}
	col, err := metrics.New(metrics.Config{Consumer: counts{}, Outbox: rows{ledger.StatusReview: 2}, Attention: needs, Sends: sends{Sent: 5},
		Lag: lag{NumPending: 7, NumAckPending: 3}})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col, metrics.NewBatches())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				key += "{" + l.GetValue() + "}"
			}
			got[key] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	for key, want := range map[string]float64{"jetledger_messages_applied_total": 3, "jetledger_outbox_rows{review}": 2,
		"jetledger_outbox_rows{queued}": 0, "jetledger_outbox_sends_total{sent}": 5, "jetledger_outbox_sends_total{deleted}": 0,
		"jetledger_consumer_pending_messages": 7, "jetledger_consumer_ack_pending_messages": 3, "jetledger_attention{review}": 2, "jetledger_attention{conflict}": 0, "jetledger_attention_oldest_seconds{conflict}": 0} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", key, v, ok, want)
		}
	}
	if age := got["jetledger_attention_oldest_seconds{review}"]; age < 3600 || age > 3600+60 {
		t.Errorf("the oldest review row's age: %v s, want an hour", age)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	if _, err := metrics.New(metrics.Config{}); !errors.Is(err, metrics.ErrNoConsumer) {
		t.Errorf("no consumer: %v", err)
	}
	if _, err := metrics.New(metrics.Config{Consumer: counts{}, ScrapeTimeout: -time.Second}); !errors.Is(err, metrics.ErrInvalidConfig) {
		t.Errorf("negative timeout: %v", err)
	}
}

// A real ledger's file size and its disk's free space, read at scrape.
func TestCollectorReadsTheLedgersSize(t *testing.T) {
	t.Parallel()
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	col, err := metrics.New(metrics.Config{Consumer: counts{}, Ledger: st})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			got[f.GetName()] = m.GetGauge().GetValue()
		}
	}
	if got["jetledger_ledger_size_bytes"] < 4096 || got["jetledger_ledger_disk_free_bytes"] <= 0 {
		t.Fatalf("the ledger's size %v and its disk's free space %v: want both above 0", got["jetledger_ledger_size_bytes"], got["jetledger_ledger_disk_free_bytes"])
	}
}
