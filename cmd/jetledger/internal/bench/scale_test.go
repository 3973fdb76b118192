package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/changelog"
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

// TestScaleAppliesEveryMessageOnce runs the scale benchmark small, with
// the changelog step, and checks what its jetledger consumers left: in
// each step, across a row's partition ledgers every message is recorded
// exactly once, in the ledger of its partition, every account lives in
// one ledger, and the balances add up to the amounts published; and each
// partition's changelog, applied to a fresh ledger, gives the same ledger
// rows and balances as (c_N+cl)'s.
func TestScaleAppliesEveryMessageOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const m = 2000
	cfg := Config{Dir: t.TempDir(), Handler: balanceHandler, Partitions: []int{1, 2}, ScaleMessages: m, Batch: 100, SyncInterval: "always", Changelog: true}
	copies := map[int][]ScalePartition{} // by N: each partition's changelog applied to a fresh ledger
	copyDir := t.TempDir()
	cfg.onChangelog = func(ctx context.Context, logs []*changelog.Log) error {
		for i, log := range logs {
			p := ScalePartition{Partition: i, Ledger: filepath.Join(copyDir, fmt.Sprintf("copy%d-p%d.db", len(logs), i))}
			if err := catchUpCopy(ctx, cfg, log, p.Ledger); err != nil {
				return fmt.Errorf("N=%d p%d: %w", len(logs), i, err)
			}
			copies[len(logs)] = append(copies[len(logs)], p)
		}
		return nil
	}
	res, err := Scale(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 2 || !res.Changelog {
		t.Fatalf("%d rows, changelog %v: want 2, true", len(res.Rows), res.Changelog)
	}
	for _, row := range res.Rows {
		stream := fmt.Sprintf("SCALE%d", row.Partitions)
		if row.RawPerSec <= 0 || row.RawNPerSec <= 0 || row.LedgerPerSec <= 0 || row.ChangelogPerSec <= 0 || row.RatioChangelog <= 0 ||
			len(row.PartitionResults) != row.Partitions {
			t.Errorf("N=%d: rates %v/%v/%v/%v, ratio %v, %d partitions: want positive rates and ratio, one result per partition",
				row.Partitions, row.RawPerSec, row.RawNPerSec, row.LedgerPerSec, row.ChangelogPerSec, row.RatioChangelog, len(row.PartitionResults))
		}
		if row.ChangelogBytesPerMsg <= 0 {
			t.Errorf("N=%d: %v changelog bytes per message, want some", row.Partitions, row.ChangelogBytesPerMsg)
		}
		withLog := make([]ScalePartition, len(row.PartitionResults))
		for i, p := range row.PartitionResults {
			withLog[i] = p
			withLog[i].Ledger = p.ChangelogLedger
		}
		checkExactlyOnce(t, fmt.Sprintf("N=%d (c_N)", row.Partitions), stream, m, row.PartitionResults)
		checkExactlyOnce(t, fmt.Sprintf("N=%d (c_N+cl)", row.Partitions), stream, m, withLog)
		if len(copies[row.Partitions]) != row.Partitions {
			t.Fatalf("N=%d: %d changelogs read back, want %d", row.Partitions, len(copies[row.Partitions]), row.Partitions)
		}
		for i, c := range copies[row.Partitions] {
			ids, _, sum := readPartitionLedger(t, withLog[i])
			cids, _, csum := readPartitionLedger(t, c)
			slices.Sort(ids)
			slices.Sort(cids)
			if len(ids) != withLog[i].Messages || !slices.Equal(cids, ids) || csum != sum {
				t.Errorf("N=%d p%d: the changelog's copy holds %d messages, balances %d; the ledger %d (of %d), %d: want the same",
					row.Partitions, i, len(cids), csum, len(ids), withLog[i].Messages, sum)
			}
		}
	}
}

// catchUpCopy applies log to a fresh ledger at path, with the handler's
// schema, and checks it read the whole log: a take-over and a batch at
// least.
func catchUpCopy(ctx context.Context, cfg Config, log *changelog.Log, path string) error {
	st, _, err := openLedger(ctx, cfg, path, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	// The cluster shares the host with the test: a read it does not answer
	// at once ("no responders" in an election) is tried again, from where
	// the copy stands.
	applied, last, err := log.CatchUp(ctx, st)
	for try := 1; err != nil && !errors.Is(err, changelog.ErrNeedSnapshot) && try < 20 && ackwait.Sleep(ctx, 250*time.Millisecond); try++ {
		applied, last, err = log.CatchUp(ctx, st)
	}
	switch {
	case err != nil:
		return err
	case applied != last || last < 2:
		return fmt.Errorf("applied %d of the changelog's %d entries: want all, and 2 at least", applied, last)
	}
	return nil
}

// checkExactlyOnce checks a step's partition ledgers: every message of
// the row's stream recorded once, in its partition's ledger, each account
// in one ledger, and the balances adding up to the amounts published.
func checkExactlyOnce(t *testing.T, step, stream string, m int, parts []ScalePartition) {
	t.Helper()
	seen := map[string]int{}
	owner := map[string]int{}
	var total int64
	for _, p := range parts {
		ids, accounts, sum := readPartitionLedger(t, p)
		if len(ids) != p.Messages {
			t.Errorf("%s p%d: %d ledger rows, want its %d messages", step, p.Partition, len(ids), p.Messages)
		}
		for _, id := range ids {
			seen[id]++
		}
		for _, a := range accounts {
			if q, ok := owner[a]; ok {
				t.Errorf("%s: account %s in the ledgers of partitions %d and %d", step, a, q, p.Partition)
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
			t.Errorf("%s: message %s applied %d times, want once", step, scaleID(stream, i), n)
		}
	}
	if len(seen) != m {
		t.Errorf("%s: %d distinct ids in the ledgers, want %d", step, len(seen), m)
	}
	if total != want {
		t.Errorf("%s: balances add up to %d, want the %d published", step, total, want)
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
		{name: "changelog", change: func(c *Config) { c.Changelog = true }},
		{name: "changelog without partitions", change: func(c *Config) { c.Partitions, c.Changelog = nil, true }, wantErr: ErrConfig},
	}
	for _, tt := range tests {
		c := ok
		tt.change(&c)
		if err := c.Validate(); !errors.Is(err, tt.wantErr) {
			t.Errorf("%s: err %v, want %v", tt.name, err, tt.wantErr)
		}
	}
}
