package changelog_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// An operator purges the log under its owner, which knows the id of the
// entry it wrote last, and the server restarts (an upgrade): the server no
// longer knows the stream's last id, so the owner's next entry, refused
// for its expected id, is published again with its sequence the check, in
// the same instance of the log. The owner goes on committing; nothing is
// fenced.
func TestAnOwnerWritesOnAfterItsLogIsPurged(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := server.Options{StoreDir: t.TempDir(), Port: consumertest.FreePort(t)}
	first := opts
	s := consumertest.RunServerWithOptions(t, &first)
	nc, js := consumertest.Connect(t, s, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	cfg := changelog.Config{Stream: "PAY", Durable: "pay-p0"}
	log := ensure(t, js, cfg)
	lease, err := changelog.OpenLease(ctx, js, "PAY", "pay-p0", "host-a", time.Minute, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	st := openLedger(t, filepath.Join(t.TempDir(), "a.db"), log.Owned(lease))
	if err := changelog.Own(ctx, log, lease, st); err != nil {
		t.Fatal(err)
	}
	budget := ledger.Budget{Work: time.Minute}
	if _, err := st.ApplyBatch(ctx, batch(0, 5, 0), credit, budget); err != nil {
		t.Fatal(err)
	}
	name, _ := changelog.Names("PAY", "pay-p0")
	stream, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	s.WaitForShutdown()
	again := opts
	consumertest.RunServerWithOptions(t, &again)
	consumertest.Eventually(t, time.Minute, "the client back", nc.IsConnected)
	for i := range 2 {
		if _, err := st.ApplyBatch(ctx, batch(5+5*i, 5, 0), credit, budget); err != nil {
			t.Fatalf("batch %d after the purge: %v", i, err)
		}
	}
	if amt, n := balance(t, st); amt != 15 || n != 15 {
		t.Fatalf("after the purge: balance %d over %d messages, want 15 over 15", amt, n)
	}
	info, err := stream.Info(ctx, jetstream.WithDeletedDetails(false))
	if err != nil || info.State.Msgs != 2 {
		t.Fatalf("the log after the purge: %+v %v, want the 2 entries written since", info.State, err)
	}
}
