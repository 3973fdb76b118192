package admin_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/ledger/ledgertest"
)

// reviewRows makes a ledger with n rows in review.
func reviewRows(b *testing.B, n int) (*ledger.Store, []string) {
	b.Helper()
	st, err := ledger.Open(filepath.Join(b.TempDir(), "l.db"), ledger.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st, ledgertest.ReviewRows(b, st, n)
}

// Settling 10 000 review rows: through the admin API over NATS (a dry
// run, then the action on the rows it saw, each row's change recorded)
// beside the raw baseline of the same transitions on the ledger directly,
// with no record. The ratio is the API's cost.
func BenchmarkBulkResolve10k(b *testing.B) {
	const n = 10_000
	srv := consumertest.RunServer(b)
	nc, _ := consumertest.Connect(b, srv)
	b.Run("raw", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			st, ids := reviewRows(b, n)
			b.StartTimer()
			for _, id := range ids {
				if _, err := st.Transition(context.Background(), id, ledger.ResolveFailed, ledger.Params{}); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("api", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			st, _ := reviewRows(b, n)
			addr := admin.Address{Stream: "S", Durable: fmt.Sprint("d", time.Now().UnixNano())}
			s, err := admin.Serve(admin.Config{Conn: nc, Store: st, Address: addr})
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			var dry, done admin.Acted
			err = admin.Call(ctx, nc, addr, "outbox.resolve", admin.Act{Who: "bench", Status: ledger.StatusReview, As: ledger.StatusFailed, DryRun: true}, &dry)
			if err == nil {
				err = admin.Call(ctx, nc, addr, "outbox.resolve", admin.Act{Who: "bench", IDs: dry.IDs, Seen: dry.Seen, As: ledger.StatusFailed}, &done)
			}
			cancel()
			b.StopTimer()
			s.Stop()
			if err != nil || len(done.Done) != n {
				b.Fatalf("%v: %d of %d done", err, len(done.Done), n)
			}
		}
	})
}
