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
	"github.com/nats-io/nats.go/jetstream"
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

// BenchmarkCatchUp is how fast a standby's copy applies a backlog of the
// log (2000 entries of one message each, R1), beside the raw read of the
// same messages by an ordered consumer in batches, in the same run: the
// ratio is what applying costs over reading.
func BenchmarkCatchUp(b *testing.B) {
	ctx := context.Background()
	s := consumertest.RunServer(b)
	_, js := consumertest.Connect(b, s)
	log, err := changelog.Ensure(ctx, js, changelog.Config{Stream: "PAY", Durable: "p0"})
	if err != nil {
		b.Fatal(err)
	}
	const entries = 2000
	owner := benchLedger(b, log)
	if err := owner.TakeOver(ctx, log.Instance(), "bench", 0, 0); err != nil {
		b.Fatal(err)
	}
	for i := range entries - 1 {
		if _, err := owner.ApplyBatch(ctx, batch(i, 1, 100), credit, ledger.Budget{Work: time.Minute}); err != nil {
			b.Fatal(err)
		}
	}
	name, _ := changelog.Names("PAY", "p0")
	b.Run("raw-read", func(b *testing.B) {
		for range b.N {
			cons, err := js.OrderedConsumer(ctx, name, jetstream.OrderedConsumerConfig{})
			if err != nil {
				b.Fatal(err)
			}
			for got := 0; got < entries; {
				batch, err := cons.Fetch(min(entries-got, 256))
				if err != nil {
					b.Fatal(err)
				}
				for range batch.Messages() {
					got++
				}
			}
		}
		b.ReportMetric(float64(b.N*entries)/b.Elapsed().Seconds(), "entries/s")
	})
	b.Run("catch-up", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			standby := benchLedger(b, nil)
			b.StartTimer()
			applied, _, err := log.CatchUp(ctx, standby)
			if err != nil || applied != entries {
				b.Fatalf("applied %d of %d: %v", applied, entries, err)
			}
			b.StopTimer()
			standby.Close()
			b.StartTimer()
		}
		b.ReportMetric(float64(b.N*entries)/b.Elapsed().Seconds(), "entries/s")
	})
}

// benchLedger opens a ledger with the balances table, kept by cl if set.
func benchLedger(b *testing.B, cl ledger.Changelog) *ledger.Store {
	var c ledger.Changelog
	if cl != nil {
		c = cl
	}
	st, err := ledger.Open(filepath.Join(b.TempDir(), "l.db"), ledger.Config{Changelog: c})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	if _, err := st.DB().Exec(`CREATE TABLE balances (account TEXT PRIMARY KEY, amount INTEGER NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	return st
}
