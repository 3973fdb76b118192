// Package fleet watches many edge sites from their hub.
//
// Each edge run reports a small Record upstream through its leaf link, into
// the hub's key-value bucket Bucket, one key per site (its JetStream
// domain): a Reporter publishes the latest every so often while the link is
// up and at once when it comes back; offline it costs nothing, and it never
// waits on processing. A KV bucket, not a stream of records: the hub needs
// each site's latest state, not its history, and a bucket keeps one per key
// (the nats CLI reads it too: nats kv ls JETLEDGER_FLEET).
//
// At the hub, AddSite sets up what a site needs there (the bucket, and the
// effects stream sourcing the site's effects through a durable consumer),
// idempotently; List reads every site's record and says which need a
// person, worst first. A row is named by its key, never by the site its
// record claims: a record naming another site is a mismatch.
package fleet
