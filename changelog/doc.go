// Package changelog keeps a partition's ledger on more than one host: the
// owner publishes each transaction's changes to a replicated stream of
// the partition's own before it commits (ledger.Config.Changelog), fenced
// by the stream's expected last sequence, and holds a lease in a KV
// bucket; a standby applies the log to its copy (Log.CatchUp) and takes
// the lease over when the owner's host is lost.
//
//	log, _ := changelog.Ensure(ctx, js, changelog.Config{Stream: "PAY", Durable: "pay-p0", Replicas: 3})
//	st, _ := ledger.Open("pay-p0.db", ledger.Config{Changelog: log})
//	applied, last, _ := log.CatchUp(ctx, st)
//	_ = st.TakeOver(ctx, log.Instance(), "host-b", applied, last)
package changelog
