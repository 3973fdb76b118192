package metrics

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// ScrapeTimeoutDefault bounds the outbox count a scrape reads.
const ScrapeTimeoutDefault = 5 * time.Second

// Counter is what the counters read of a consumer (*consumer.Consumer).
type Counter interface{ Counts() consumer.Counts }

// OutboxCounter is what jetledger_outbox_rows reads of a ledger
// (*ledger.Store).
type OutboxCounter interface {
	OutboxCounts(ctx context.Context) (map[ledger.Status]int64, error)
}

// AttentionCounter is what jetledger_attention and
// jetledger_attention_oldest_seconds read of a ledger (*ledger.Store).
type AttentionCounter interface {
	Attention(ctx context.Context) ([]ledger.Attention, error)
}

// ConsumerInfo is what the consumer's lag gauges read (*consumer.Consumer).
type ConsumerInfo interface {
	Info(ctx context.Context) (*jetstream.ConsumerInfo, error)
}

// LedgerSizer is what jetledger_ledger_size_bytes and
// jetledger_ledger_disk_free_bytes read (*ledger.Store).
type LedgerSizer interface {
	Path() string
	Size(ctx context.Context) (int64, error)
}

// SendCounter is what jetledger_outbox_sends_total reads of a dispatcher
// (*outbox.Dispatcher).
type SendCounter interface{ Counts() outbox.Counts }

var (
	_ Counter          = (*consumer.Consumer)(nil)
	_ OutboxCounter    = (*ledger.Store)(nil)
	_ AttentionCounter = (*ledger.Store)(nil)
	_ SendCounter      = (*outbox.Dispatcher)(nil)
	_ LedgerSizer      = (*ledger.Store)(nil)
)

// Config says what a Collector reads at scrape time.
type Config struct {
	// Consumer's running totals are the jetledger_messages_*, naks, terms
	// and dead letters counters. Required.
	Consumer Counter
	// Outbox, when set, is read for jetledger_outbox_rows{status}. Default
	// nil: left out.
	Outbox OutboxCounter
	// Attention, when set, is read for jetledger_attention{kind} and
	// jetledger_attention_oldest_seconds{kind}: the rows that need a
	// person. Default nil: left out.
	Attention AttentionCounter
	// Lag, when set, is read for jetledger_consumer_pending_messages and
	// jetledger_consumer_ack_pending_messages: one request to the server
	// per scrape. Default nil: left out.
	Lag ConsumerInfo
	// Ledger, when set, is read for jetledger_ledger_size_bytes and
	// jetledger_ledger_disk_free_bytes. Default nil: left out.
	Ledger LedgerSizer
	// Sends, when set, is read for jetledger_outbox_sends_total{result}.
	// Default nil: left out (no sink).
	Sends SendCounter
	// ScrapeTimeout bounds the outbox count of one scrape. Default
	// ScrapeTimeoutDefault (5s).
	ScrapeTimeout time.Duration
}

// Collector is a prometheus.Collector of the running totals of a consumer,
// its ledger's outbox and a dispatcher, read at scrape time.
type Collector struct {
	counters      []prometheus.Collector
	outbox        OutboxCounter
	attention     AttentionCounter
	lag           ConsumerInfo
	sends         SendCounter
	ledger        LedgerSizer
	timeout       time.Duration
	size, free    *prometheus.Desc
	rows, results *prometheus.Desc
	needs, oldest *prometheus.Desc
	pending, acks *prometheus.Desc
}

// New validates cfg and returns its Collector; it reads nothing until
// collected.
func New(cfg Config) (*Collector, error) {
	if cfg.Consumer == nil {
		return nil, ErrNoConsumer
	}
	if cfg.ScrapeTimeout < 0 {
		return nil, fmt.Errorf("%w: ScrapeTimeout %v: want 0 (default) or more", ErrInvalidConfig, cfg.ScrapeTimeout)
	}
	c := cfg.Consumer
	col := &Collector{outbox: cfg.Outbox, attention: cfg.Attention, lag: cfg.Lag, sends: cfg.Sends, ledger: cfg.Ledger, timeout: cmp.Or(cfg.ScrapeTimeout, ScrapeTimeoutDefault),
		size:    prometheus.NewDesc("jetledger_ledger_size_bytes", "The ledger's database file, WAL excluded.", nil, nil),
		free:    prometheus.NewDesc("jetledger_ledger_disk_free_bytes", "Space left on the ledger's disk for this process.", nil, nil),
		rows:    prometheus.NewDesc("jetledger_outbox_rows", "Outbox rows per state; review rows wait for a person.", []string{"status"}, nil),
		results: prometheus.NewDesc("jetledger_outbox_sends_total", "Outbox send outcomes.", []string{"result"}, nil),
		needs: prometheus.NewDesc("jetledger_attention", "Rows that need a person, per kind: review (an ambiguous send), dead_letter, conflict (not acknowledged).",
			[]string{"kind"}, nil),
		oldest: prometheus.NewDesc("jetledger_attention_oldest_seconds", "How long the oldest row of each kind has needed a person; 0 when none does.",
			[]string{"kind"}, nil),
		pending: prometheus.NewDesc("jetledger_consumer_pending_messages", "Messages of the stream the durable has not delivered yet: the lag.", nil, nil),
		acks:    prometheus.NewDesc("jetledger_consumer_ack_pending_messages", "Messages delivered and not acknowledged yet.", nil, nil)}
	counter := func(name, help string, f func(consumer.Counts) uint64) {
		col.counters = append(col.counters, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(f(c.Counts())) }))
	}
	counter("jetledger_messages_applied_total", "Messages applied: ledger row and handler change committed.", func(n consumer.Counts) uint64 { return n.Applied })
	counter("jetledger_messages_duplicate_total", "Redelivered messages already in the ledger: acked, not applied.", func(n consumer.Counts) uint64 { return n.Duplicates })
	counter("jetledger_messages_conflict_total", "Messages reusing an applied id with another payload: recorded, not applied.", func(n consumer.Counts) uint64 { return n.Conflicts })
	counter("jetledger_messages_failed_total", "Message handlings that failed and were rolled back.", func(n consumer.Counts) uint64 { return n.Failed })
	counter("jetledger_naks_total", "Messages handed back for redelivery.", func(n consumer.Counts) uint64 { return n.Naks })
	counter("jetledger_terms_total", "Messages terminated (dead letters and conflicts).", func(n consumer.Counts) uint64 { return n.Terms })
	counter("jetledger_dead_letters_total", "Dead letters recorded.", func(n consumer.Counts) uint64 { return n.DeadLetters })
	counter("jetledger_messages_stale_total", "Messages left to redelivery because they waited past their AckWait budget.", func(n consumer.Counts) uint64 { return n.Stale })
	return col, nil
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, k := range c.counters {
		k.Describe(ch)
	}
	if c.outbox != nil {
		ch <- c.rows
	}
	if c.attention != nil {
		ch <- c.needs
		ch <- c.oldest
	}
	if c.lag != nil {
		ch <- c.pending
		ch <- c.acks
	}
	if c.sends != nil {
		ch <- c.results
	}
	if c.ledger != nil {
		ch <- c.size
		ch <- c.free
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, k := range c.counters {
		k.Collect(ch)
	}
	if c.outbox != nil {
		c.collectOutbox(ch)
	}
	if c.attention != nil {
		c.collectAttention(ch)
	}
	if c.lag != nil {
		c.collectLag(ch)
	}
	if c.ledger != nil {
		c.collectLedger(ch)
	}
	if c.sends != nil {
		n := c.sends.Counts()
		for result, v := range map[string]uint64{"sent": n.Sent, "failed": n.Failed, "retried": n.Retried, "review": n.Review, "deleted": n.Deleted} {
			ch <- prometheus.MustNewConstMetric(c.results, prometheus.CounterValue, float64(v), result)
		}
	}
}

// collectLedger reports the ledger's size and its disk's free space
// (left out where this OS cannot say).
func (c *Collector) collectLedger(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	n, err := c.ledger.Size(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.size, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(n))
	if free, ok := ledger.DiskFree(c.ledger.Path()); ok {
		ch <- prometheus.MustNewConstMetric(c.free, prometheus.GaugeValue, float64(free))
	}
}

// collectOutbox reports outbox rows per state.
func (c *Collector) collectOutbox(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	counts, err := c.outbox.OutboxCounts(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.rows, err)
		return
	}
	for _, s := range ledger.Statuses {
		ch <- prometheus.MustNewConstMetric(c.rows, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
}

// collectAttention reports the rows that need a person, per kind.
func (c *Collector) collectAttention(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	as, err := c.attention.Attention(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.needs, err)
		return
	}
	for _, a := range as {
		age := 0.0
		if !a.Oldest.IsZero() {
			age = max(time.Since(a.Oldest).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(c.needs, prometheus.GaugeValue, float64(a.Count), a.Kind)
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age, a.Kind)
	}
}

// collectLag reports the durable's pending and unacknowledged messages.
func (c *Collector) collectLag(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	info, err := c.lag.Info(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.pending, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(info.NumPending))
	ch <- prometheus.MustNewConstMetric(c.acks, prometheus.GaugeValue, float64(info.NumAckPending))
}
