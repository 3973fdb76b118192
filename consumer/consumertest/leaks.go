package consumertest

import "go.uber.org/goleak"

// KnownLeaks are goroutines the libraries leave behind by a race of their
// own, which goleak is told to ignore. nats.go's object store Put publishes
// through a JetStream context of its own whose reply handler it cleans up
// on return; the goroutine that watches the connection's status for that
// handler reads its channel when it starts, and when the cleanup has
// already set it to nil it waits on the nil channel for ever
// (jetstream/publish.go resetPendingAcksOnReconnect, nats.go v1.55.0).
// The snapshots of owned partitions are such Puts.
var KnownLeaks = []goleak.Option{
	goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"),
}
