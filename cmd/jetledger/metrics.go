package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/node"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics holds the listener of --metrics and the observations that are not
// running totals of the consumer or dispatcher (those are read at scrape
// time).
type metrics struct {
	listener                             net.Listener
	batchSize, commitSeconds, ackSeconds prometheus.Histogram
}

// listenMetrics takes the address of --metrics, which serveMetrics serves.
func listenMetrics(addr string) (*metrics, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics %s: %w", addr, err)
	}
	return &metrics{listener: l,
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "jetledger_batch_messages",
			Help: "Messages per committed batch.", Buckets: prometheus.ExponentialBuckets(1, 2, 12)}),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "jetledger_batch_commit_seconds",
			Help: "Time from a batch's begin to its commit, handlers included.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		ackSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "jetledger_batch_ack_seconds",
			Help: "Time to send a committed batch's acks, naks and terms.", Buckets: prometheus.ExponentialBuckets(0.00005, 2, 14)}),
	}, nil
}

func (m *metrics) afterCommit(r consumer.BatchReport) {
	m.batchSize.Observe(float64(len(r.Results)))
	m.commitSeconds.Observe(r.Elapsed.Seconds())
}

func (m *metrics) afterAcks(r consumer.AckReport) { m.ackSeconds.Observe(r.Elapsed.Seconds()) }

// outboxCollector reports outbox rows per state at scrape time.
type outboxCollector struct {
	st   *ledger.Store
	desc *prometheus.Desc
}

func (o outboxCollector) Describe(ch chan<- *prometheus.Desc) { ch <- o.desc }

func (o outboxCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := o.st.OutboxCounts(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(o.desc, err)
		return
	}
	for _, s := range ledger.Statuses {
		ch <- prometheus.MustNewConstMetric(o.desc, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
}

// serveMetrics serves /metrics and /healthz on m's listener until ctx ends;
// store is the embedded server, nil with --nats.
func serveMetrics(ctx context.Context, m *metrics, c *consumer.Consumer, d *dispatcher,
	st *ledger.Store, nc *nats.Conn, store *node.Node, log *slog.Logger) {
	reg := prometheus.NewRegistry()
	counter := func(name, help string, f func() uint64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f()) }))
	}
	counter("jetledger_messages_applied_total", "Messages applied: ledger row and handler change committed.", func() uint64 { return c.Counts().Applied })
	counter("jetledger_messages_duplicate_total", "Redelivered messages already in the ledger: acked, not applied.", func() uint64 { return c.Counts().Duplicates })
	counter("jetledger_messages_conflict_total", "Messages reusing an applied id with another payload: recorded, not applied.", func() uint64 { return c.Counts().Conflicts })
	counter("jetledger_messages_failed_total", "Message handlings that failed and were rolled back.", func() uint64 { return c.Counts().Failed })
	counter("jetledger_naks_total", "Messages handed back for redelivery.", func() uint64 { return c.Counts().Naks })
	counter("jetledger_terms_total", "Messages terminated (dead letters and conflicts).", func() uint64 { return c.Counts().Terms })
	counter("jetledger_dead_letters_total", "Dead letters recorded.", func() uint64 { return c.Counts().DeadLetters })
	counter("jetledger_messages_stale_total", "Messages left to redelivery because they waited past their AckWait budget.", func() uint64 { return c.Counts().Stale })
	reg.MustRegister(m.batchSize, m.commitSeconds, m.ackSeconds,
		outboxCollector{st: st, desc: prometheus.NewDesc("jetledger_outbox_rows", "Outbox rows per state; review rows wait for a person.", []string{"status"}, nil)},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if d != nil {
		sends := prometheus.NewDesc("jetledger_outbox_sends_total", "Outbox send outcomes.", []string{"result"}, nil)
		reg.MustRegister(sendCollector{d: d, desc: sends})
	}

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	probes := []healthProbe{natsProbe(nc), databaseProbe(st), consumerProbe(c)}
	if store != nil {
		probes = append(probes, storeProbe(store))
	}
	mux.Handle("/healthz", newHealth(log, probes...))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx) //nolint:errcheck // best effort on exit
	}()
	go func() {
		if err := srv.Serve(m.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	log.Info("serving metrics", "addr", m.listener.Addr().String())
}

// sendCollector reports the dispatcher's send outcomes at scrape time.
type sendCollector struct {
	d    *dispatcher
	desc *prometheus.Desc
}

func (s sendCollector) Describe(ch chan<- *prometheus.Desc) { ch <- s.desc }

func (s sendCollector) Collect(ch chan<- prometheus.Metric) {
	n := s.d.Counts()
	for result, v := range map[string]uint64{"sent": n.Sent, "failed": n.Failed, "retried": n.Retried, "review": n.Review, "deleted": n.Deleted} {
		ch <- prometheus.MustNewConstMetric(s.desc, prometheus.CounterValue, float64(v), result)
	}
}
