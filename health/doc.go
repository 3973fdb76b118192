// Package health is jetledger's health check as an http.Handler: a round
// of probes (the NATS connection, the ledger's database, the consumer, an
// embedded server's store) answered as JSON with each check's state, 200
// when all are healthy and 503 otherwise. The states say what is wrong,
// never where: no paths or error text reach the body; a state that
// changes is logged with its error. A round answers for Config.Refresh
// (2s), so a prober asking often costs one round.
//
//	h, err := health.New(health.Config{Logger: log},
//		health.NATS(nc), health.Database(st), health.Consumer(c))
//	if err != nil {
//		return err
//	}
//	mux.Handle("/healthz", h)
//	// {"healthy":false,"checks":{"consumer":"ok","database":"disk_full","nats":"ok"}}
package health
