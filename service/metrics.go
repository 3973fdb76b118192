package service

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/health"
	"github.com/jetledger/jetledger/metrics"
	"github.com/jetledger/jetledger/node"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// serveMetrics serves /metrics and /healthz on Config.Metrics until ctx
// ends, its goroutines in wg; store is the embedded node, nil with NATS.
func (s *Service) serveMetrics(ctx context.Context, wg *sync.WaitGroup, batches *metrics.Batches, c *consumer.Consumer, d *outbox.Dispatcher, store *node.Node) error {
	cfg := metrics.Config{Consumer: c, Outbox: s.st, Attention: s.st, Lag: c, Ledger: s.st}
	if d != nil {
		cfg.Sends = d
	}
	col, err := metrics.New(cfg)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(batches, col)
	reg.MustRegister(s.cfg.collectors...)
	probes := []health.Probe{health.NATS(s.nc), health.Database(s.st), health.Consumer(c), health.Attention(s.st)}
	if store != nil {
		probes = append(probes, StoreProbe(store))
	}
	if s.node != nil && s.cfg.site() != "" {
		read := s.sourcing()
		probes = append(probes, s.hubProbe(), sourcingProbe(read))
		reg.MustRegister(s.hubGauges(read)...)
	}
	h, err := health.New(health.Config{Logger: s.log}, probes...)
	if err != nil {
		return err
	}
	mux := metricsMux(reg, h)
	if to := s.cfg.metricsTo; to != nil {
		to(mux)
		wg.Go(func() {
			<-ctx.Done()
			to(nil)
		})
		return nil
	}
	done := serveHTTP(ctx, s.log, s.cfg.Metrics, s.cfg.MetricsCert, s.cfg.MetricsKey, mux)
	wg.Go(func() { <-done })
	return nil
}

// metricsMux serves reg, with the Go runtime's and the process's
// collectors added, on /metrics, and health on /healthz.
func metricsMux(reg *prometheus.Registry, health http.Handler) *http.ServeMux {
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/healthz", health)
	return mux
}

// serveHTTP serves h on l, with TLS when cert is set, until ctx ends, and
// says where (logServing); the channel closes once it has shut down.
func serveHTTP(ctx context.Context, log *slog.Logger, l net.Listener, cert, key string, h http.Handler) <-chan struct{} {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	done, served := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx) //nolint:errcheck // best effort on exit
		<-served
	}()
	go func() {
		defer close(served)
		var err error
		if cert != "" {
			err = srv.ServeTLS(l, cert, key)
		} else {
			err = srv.Serve(l)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	logServing(log, l, cert != "")
	return done
}

// logServing says where metrics are served, and warns of an address that
// is not loopback.
func logServing(log *slog.Logger, l net.Listener, tls bool) {
	log.Info("serving metrics", "addr", l.Addr().String(), "tls", tls)
	if a, ok := l.Addr().(*net.TCPAddr); ok && !a.IP.IsLoopback() {
		log.Warn("metrics and /healthz are served to anyone who can reach this address: counts and health states, no paths or errors; put it on a loopback or private address, behind a firewall, or give it TLS",
			"addr", a.String(), "tls", tls)
	}
}
