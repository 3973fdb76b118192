package admin_test

import (
	"context"
	"testing"
	"time"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/admin/admintest"
	"github.com/jetledger/jetledger/ledger"
)

// status says the run's applied count and its durable's lag; quick, it leaves out the ledger's
// row counts (which read every row) and says its size.
func TestAQuickStatusReadsNoRowCounts(t *testing.T) {
	t.Parallel()
	nc, st := serverAndLedger(t, ledger.Config{})
	admintest.Enqueue(t, st, "a", "b", "c")
	addr := admin.Address{Stream: "PAY", Durable: "pay"}
	s, err := admin.Serve(admin.Config{Conn: nc, Store: st, Address: addr, Applied: func() uint64 { return 7 },
		Pending: func(context.Context) (uint64, error) { return 4, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var full, quick admin.Status
	if err := admin.Call(ctx, nc, addr, "status", nil, &full); err != nil {
		t.Fatal(err)
	}
	if err := admin.Call(ctx, nc, addr, "status", admin.StatusRequest{Quick: true}, &quick); err != nil {
		t.Fatal(err)
	}
	if full.Ledger.Processed != 3 || full.Applied != 7 || full.Pending == nil || *full.Pending != 4 {
		t.Fatalf("status: %d ids, %d applied, pending %v; want 3, 7 and 4", full.Ledger.Processed, full.Applied, full.Pending)
	}
	if quick.Ledger.Processed != 0 || quick.Ledger.SizeBytes <= 0 || quick.Applied != 7 || quick.Outbox[ledger.StatusQueued] != 3 {
		t.Fatalf("a quick status: %+v; want no row count, the size, 7 applied and the outbox's counts", quick)
	}
}
