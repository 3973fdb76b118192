package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// balanceHandler stands in for run's built-in handler (package main): the
// balance upsert, its account and amount read from the payload.
func balanceHandler(_ context.Context, _ *ledger.Store, _ string) (ledger.Handler, error) {
	return func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		var p struct {
			Account string `json:"account"`
			Amount  int64  `json:"amount"`
		}
		if err := json.Unmarshal(d.Data, &p); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO balances (account, amount) VALUES (?, ?)
			ON CONFLICT (account) DO UPDATE SET amount = amount + excluded.amount`, p.Account, p.Amount)
		return err
	}, nil
}

// TestScaleAppliesEveryMessageOnce runs the scale benchmark small and
// checks what its jetledger consumers left: across a row's partition
// ledgers every message is recorded exactly once, in the ledger of its
// partition, every account lives in one ledger, and the balances add up
// to the amounts published.
func TestScaleAppliesEveryMessageOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const m = 2000
	cfg := Config{Dir: t.TempDir(), Handler: balanceHandler, Partitions: []int{1, 2}, ScaleMessages: m, Batch: 100, SyncInterval: "always"}
	res, err := Scale(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 2 {
		t.Fatalf("%d rows, want 2", len(res.Rows))
	}
	for _, row := range res.Rows {
		stream := fmt.Sprintf("SCALE%d", row.Partitions)
		if row.RawPerSec <= 0 || row.RawNPerSec <= 0 || row.LedgerPerSec <= 0 || len(row.PartitionResults) != row.Partitions {
			t.Errorf("N=%d: rates %v/%v/%v, %d partitions: want positive rates, one result per partition",
				row.Partitions, row.RawPerSec, row.RawNPerSec, row.LedgerPerSec, len(row.PartitionResults))
		}
		seen := map[string]int{}
		owner := map[string]int{}
		var total int64
		for _, p := range row.PartitionResults {
			ids, accounts, sum := readPartitionLedger(t, p)
			if len(ids) != p.Messages {
				t.Errorf("N=%d p%d: %d ledger rows, want its %d messages", row.Partitions, p.Partition, len(ids), p.Messages)
			}
			for _, id := range ids {
				seen[id]++
			}
			for _, a := range accounts {
				if q, ok := owner[a]; ok {
					t.Errorf("N=%d: account %s in the ledgers of partitions %d and %d", row.Partitions, a, q, p.Partition)
				}
				owner[a] = p.Partition
			}
			total += sum
		}
		rng := rand.New(rand.NewPCG(1, 1))
		var want int64
		for i := range m {
			msg := scaleMessage(rng, stream, i)
			var p struct{ Amount int64 }
			if err := json.Unmarshal(msg.Data, &p); err != nil {
				t.Fatal(err)
			}
			want += p.Amount
			if n := seen[scaleID(stream, i)]; n != 1 {
				t.Errorf("N=%d: message %s applied %d times, want once", row.Partitions, scaleID(stream, i), n)
			}
		}
		if len(seen) != m {
			t.Errorf("N=%d: %d distinct ids in the ledgers, want %d", row.Partitions, len(seen), m)
		}
		if total != want {
			t.Errorf("N=%d: balances add up to %d, want the %d published", row.Partitions, total, want)
		}
	}
}

// readPartitionLedger returns the message ids of a partition's ledger
// (checking each was stored under its partition's subjects), its accounts
// and the sum of their balances.
func readPartitionLedger(t *testing.T, p ScalePartition) (ids, accounts []string, sum int64) {
	t.Helper()
	st, err := ledger.Open(p.Ledger, ledger.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rows, err := st.DB().Query(`SELECT message_id, subject FROM processed_messages`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, subject string
		if err := rows.Scan(&id, &subject); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(subject, fmt.Sprintf("%d.", p.Partition)) {
			t.Errorf("p%d: message %s on subject %s, outside the partition", p.Partition, id, subject)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	brows, err := st.DB().Query(`SELECT account, amount FROM balances`)
	if err != nil {
		t.Fatal(err)
	}
	defer brows.Close()
	for brows.Next() {
		var a string
		var n int64
		if err := brows.Scan(&a, &n); err != nil {
			t.Fatal(err)
		}
		accounts, sum = append(accounts, a), sum+n
	}
	if err := brows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids, accounts, sum
}

func TestScaleConfigValidate(t *testing.T) {
	t.Parallel()
	ok := Config{Messages: 1000, PerMsgMessages: 100, Batch: 1, Rates: []int{1}, FailEvery: 2, LatencyDuration: time.Second,
		Partitions: []int{1, 2, 4}, ScaleMessages: 1000, SyncInterval: "always"}
	tests := []struct {
		name    string
		change  func(*Config)
		wantErr error
	}{
		{name: "smallest", change: func(*Config) {}},
		{name: "no scale run ignores its messages", change: func(c *Config) { c.Partitions, c.ScaleMessages = nil, 0 }},
		{name: "sync as a duration", change: func(c *Config) { c.SyncInterval = "2m0s" }},
		{name: "zero partitions", change: func(c *Config) { c.Partitions = []int{1, 0} }, wantErr: ErrConfig},
		{name: "too many partitions", change: func(c *Config) { c.Partitions = []int{65} }, wantErr: ErrConfig},
		{name: "too few messages", change: func(c *Config) { c.ScaleMessages = 999 }, wantErr: ErrConfig},
		{name: "bad sync", change: func(c *Config) { c.SyncInterval = "sometimes" }, wantErr: ErrConfig},
	}
	for _, tt := range tests {
		c := ok
		tt.change(&c)
		if err := c.Validate(); !errors.Is(err, tt.wantErr) {
			t.Errorf("%s: err %v, want %v", tt.name, err, tt.wantErr)
		}
	}
}
