package changelog_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
)

// BenchmarkBatchChangelog is the cost of the changelog on the commit
// path: batches of 100 messages applied with and without it, on one
// embedded server (R1), in the same run. It reports the changelog's bytes
// per message.
func BenchmarkBatchChangelog(b *testing.B) {
	for _, withLog := range []bool{false, true} {
		b.Run(fmt.Sprintf("changelog=%v", withLog), func(b *testing.B) {
			ctx := context.Background()
			s := consumertest.RunServer(b)
			_, js := consumertest.Connect(b, s)
			var log *changelog.Log
			var cl ledger.Changelog
			if withLog {
				var err error
				if log, err = changelog.Ensure(ctx, js, changelog.Config{Stream: "PAY", Durable: "p0"}); err != nil {
					b.Fatal(err)
				}
				cl = log
			}
			st, err := ledger.Open(filepath.Join(b.TempDir(), "a.db"), ledger.Config{Changelog: cl})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			if _, err := st.DB().Exec(`CREATE TABLE balances (account TEXT PRIMARY KEY, amount INTEGER NOT NULL)`); err != nil {
				b.Fatal(err)
			}
			if withLog {
				if err := st.TakeOver(ctx, log.Instance(), "bench", 0, 0); err != nil {
					b.Fatal(err)
				}
			}
			const size = 100
			b.ResetTimer()
			for i := range b.N {
				if _, err := st.ApplyBatch(ctx, batch(i*size, size, 100), credit, ledger.Budget{Work: time.Minute}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "msgs/s")
			if withLog {
				name, _ := changelog.Names("PAY", "p0")
				str, err := js.Stream(ctx, name)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(str.CachedInfo().State.Bytes)/float64(b.N*size), "changelog-bytes/msg")
			}
		})
	}
}
