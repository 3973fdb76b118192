package requeue

import (
	"errors"
	"testing"

	"github.com/jetledger/jetledger/stream"
	"github.com/nats-io/nats.go/jetstream"
)

// A copy run made with a durable source (issue 24) keeps its hub filter in
// the metadata, not on the source: a dead letter on a subject outside the
// filter (recorded before the copy was made again with another
// --hub-filter) must still be refused, as for an ephemeral source with
// the filter, and not published into the hub's stream, which the copy
// would never take it from.
func TestDurableOriginStreamDurableSourceKeepsTheFilter(t *testing.T) {
	cfg := jetstream.StreamConfig{Name: "PAY", Metadata: map[string]string{stream.MetaSourceFilter: "orders.site1.pay.>"},
		Sources: []*jetstream.StreamSource{{Name: "ORDERS", Domain: "hub", Consumer: &jetstream.StreamConsumerSource{Name: "jetledger_site1_PAY_01abc", DeliverSubject: "_JETLEDGER.src.copy.site1.PAY.01abc"}}}}
	into, _, err := originStream(cfg, "orders.site1.refund")
	if !errors.Is(err, ErrNoOrigin) {
		t.Errorf("originStream = %q, %v; want ErrNoOrigin (the copy's filter orders.site1.pay.> does not take orders.site1.refund)", into, err)
	}
}
