package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

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
