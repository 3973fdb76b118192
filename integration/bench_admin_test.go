package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/ledger/ledgertest"
)

// Issue 43: 10 000 review rows settled by one command through a running
// owner's admin API (`outbox resolve --nats URL --status review --as
// failed --all`: the process, its discovery of the run, the dry run and
// the action on the rows it saw, each row its own transaction with its
// record), beside the raw baseline of the same transitions on the ledger
// directly. The ratio is the command's cost.
func BenchmarkBulkResolveCommand10k(b *testing.B) {
	const n = 10_000
	b.Run("raw", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			w := worldIn(b, b.TempDir())
			st, ids := openReview(b, w.db, n)
			b.StartTimer()
			for _, id := range ids {
				if _, err := st.Transition(context.Background(), id, ledger.ResolveFailed, ledger.Params{}); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("command", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			w := newWorld(b, time.Minute)
			st, _ := openReview(b, w.db, n)
			st.Close()
			run := w.runConsumer(nil, webhookArgs(webhooktest.NewDestination(b, false))...)
			url := w.srv.ClientURL()
			consumertest.Eventually(b, time.Minute, "the run's API", func() bool {
				out, code := cli(b, "status", "--nats", url, "--site", "-")
				return code == 3 && strings.Contains(out, "review 10000")
			})
			b.StartTimer()
			p := start(b, nil, "outbox", "resolve", "--nats", url, "--status", "review", "--as", "failed", "--all", "--who", "bench")
			code := p.wait(5 * time.Minute)
			b.StopTimer()
			if out := p.output(); code != 0 || !strings.Contains(out, "10000 done, 0 skipped") {
				b.Fatalf("outbox resolve: exit %d\n%s", code, out)
			}
			run.stop()
			run.wait(time.Minute)
		}
	})
}

func openReview(b *testing.B, path string, n int) (*ledger.Store, []string) {
	st, err := ledger.Open(path, ledger.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st, ledgertest.ReviewRows(b, st, n)
}
