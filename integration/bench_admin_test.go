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
// directly. The ratio is the command's cost. Each iteration times the two
// back to back, so that a host whose load drifts (other tests, a nemesis)
// weighs on both alike: the ratio metric is of the pair.
func BenchmarkBulkResolveCommand10k(b *testing.B) {
	var raw, command time.Duration
	for range b.N {
		raw += resolveRaw(b)
		command += resolveByCommand(b)
	}
	b.ReportMetric(raw.Seconds()/float64(b.N), "raw-s/op")
	b.ReportMetric(command.Seconds()/float64(b.N), "command-s/op")
	b.ReportMetric(command.Seconds()/raw.Seconds(), "ratio")
}

const bulkRows = 10_000

// resolveRaw times the transitions of bulkRows review rows on the ledger.
func resolveRaw(b *testing.B) time.Duration {
	w := worldIn(b, b.TempDir())
	st, ids := openReview(b, w.db, bulkRows)
	t0 := time.Now()
	for _, id := range ids {
		if _, err := st.Transition(context.Background(), id, ledger.ResolveFailed, ledger.Params{}); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(t0)
}

// resolveByCommand times one `outbox resolve --all` of bulkRows review
// rows through a running owner's API.
func resolveByCommand(b *testing.B) time.Duration {
	w := newWorld(b, time.Minute)
	st, _ := openReview(b, w.db, bulkRows)
	st.Close()
	run := w.runConsumer(nil, webhookArgs(webhooktest.NewDestination(b, false))...)
	url := w.srv.ClientURL()
	consumertest.Eventually(b, time.Minute, "the run's API", func() bool {
		out, code := cli(b, "status", "--nats", url, "--site", "-")
		return code == 3 && strings.Contains(out, "review 10000")
	})
	t0 := time.Now()
	p := start(b, nil, "outbox", "resolve", "--nats", url, "--status", "review", "--as", "failed", "--all", "--who", "bench")
	code := p.wait(5 * time.Minute)
	took := time.Since(t0)
	if out := p.output(); code != 0 || !strings.Contains(out, "10000 done, 0 skipped") {
		b.Fatalf("outbox resolve: exit %d\n%s", code, out)
	}
	run.stop()
	run.wait(time.Minute)
	return took
}

func openReview(b *testing.B, path string, n int) (*ledger.Store, []string) {
	st, err := ledger.Open(path, ledger.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st, ledgertest.ReviewRows(b, st, n)
}
