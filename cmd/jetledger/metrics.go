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
	"github.com/jetledger/jetledger/health"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/metrics"
	"github.com/jetledger/jetledger/node"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metricsListener holds the listener of --metrics and the batch
// observations, whose hooks go into the consumer before it is made.
type metricsListener struct {
	listener net.Listener
	*metrics.Batches
}

// listenMetrics takes the address of --metrics, which serveMetrics serves.
func listenMetrics(addr string) (*metricsListener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics %s: %w", addr, err)
	}
	return &metricsListener{listener: l, Batches: metrics.NewBatches()}, nil
}

// serveMetrics serves /metrics and /healthz on m's listener until ctx ends;
// store is the embedded server, nil with --nats.
func serveMetrics(ctx context.Context, m *metricsListener, c *consumer.Consumer, d *dispatcher,
	st *ledger.Store, nc *nats.Conn, store *node.Node, log *slog.Logger) error {
	cfg := metrics.Config{Consumer: c, Outbox: st}
	if d != nil {
		cfg.Sends = d
	}
	col, err := metrics.New(cfg)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.Batches, col, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	probes := []health.Probe{health.NATS(nc), health.Database(st), health.Consumer(c)}
	if store != nil {
		probes = append(probes, storeProbe(store))
	}
	h, err := health.New(health.Config{Logger: log}, probes...)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/healthz", h)
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
	return nil
}
