package metrics

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ShutdownTimeout bounds how long Serve waits, once its ctx ends, for the
// requests in flight.
const ShutdownTimeout = 5 * time.Second

// Handler serves cs, on a registry of their own, as a Prometheus scrape
// endpoint: for a program whose metrics are these, in place of a registry,
// its MustRegister and promhttp.HandlerFor. Like MustRegister, it panics if
// two of cs describe the same metric. A program with metrics of its own
// registers Batches and Collector on its registry instead.
func Handler(cs ...prometheus.Collector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(cs...)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// Serve serves /metrics (cs, as Handler does) and, if healthz is not nil,
// /healthz (a *health.Handler, say) on ln until ctx ends, then shuts the
// server down, waiting ShutdownTimeout at most for requests in flight. It
// returns nil once ctx ends, or the error that stopped the server. ln is
// the caller's, listened on before, so that its address is known and a
// port in use fails the start; Serve closes it.
func Serve(ctx context.Context, ln net.Listener, healthz http.Handler, cs ...prometheus.Collector) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", Handler(cs...))
	if healthz != nil {
		mux.Handle("/healthz", healthz)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		srv.Close() // requests still in flight at the timeout
	}
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}
