// Package metrics is jetledger's Prometheus collectors, for a library user
// to register on their own prometheus.Registerer: Batches, whose hooks go
// into consumer.Config and observe each batch's size, commit time and ack
// time; and Collector, which reads a consumer's running totals, the
// ledger's outbox rows per state and a dispatcher's send outcomes at
// scrape time.
//
//	b := metrics.NewBatches()
//	cfg.AfterCommit, cfg.AfterAcks = b.AfterCommit, b.AfterAcks
//	c, err := consumer.New(ctx, js, st, cfg)
//	if err != nil {
//		return err
//	}
//	col, err := metrics.New(metrics.Config{Consumer: c, Outbox: st})
//	if err != nil {
//		return err
//	}
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(b, col)
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// A program whose only metrics are these serves them with Handler, or
// serves them and its health check on a listener of its own until ctx ends
// with Serve:
//
//	http.Handle("/metrics", metrics.Handler(b, col))
//	go metrics.Serve(ctx, ln, healthHandler, b, col) // /metrics and /healthz
package metrics
