package ledger_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

const benchApply = `INSERT INTO balances (account, amount)
	VALUES (json_extract(:data, '$.account'), json_extract(:data, '$.amount'))
	ON CONFLICT (account) DO UPDATE SET amount = amount + excluded.amount`

var benchEvents = &ledger.Insert{Table: "events", Columns: []string{"message_id", "subject", "stream_seq", "data", "applied_at"}}

// balanceHandler is the --apply balance handler of the binary, with the
// events row the built-in handler writes.
func balanceHandler(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
	if err := tx.InsertLater(benchEvents, d.MessageID, d.Subject, int64(d.Sequence), d.Data, int64(0)); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, benchApply, sql.Named("data", string(d.Data)))
	return err
}

// BenchmarkApplyBatch measures the ledger's cost per message for one
// transaction per message and for group commit. Compare ns/op across sizes.
func BenchmarkApplyBatch(b *testing.B) {
	for _, size := range []int{1, 100, 500} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			st, err := ledger.Open(filepath.Join(b.TempDir(), "l.db"), ledger.Config{})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			if _, err := st.DB().Exec(`CREATE TABLE balances (account TEXT PRIMARY KEY, amount INTEGER NOT NULL);
				CREATE TABLE events (message_id TEXT PRIMARY KEY, subject TEXT, stream_seq INTEGER, data BLOB, applied_at INTEGER) WITHOUT ROWID`); err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour) // as the consumer's deadline
			defer cancel()
			batch := make([]ledger.Delivery, size)
			b.ResetTimer()
			for i := 0; i < b.N; {
				n := min(size, b.N-i)
				for j := 0; j < n; j++ {
					batch[j] = ledger.Delivery{MessageID: fmt.Sprintf("01JBENCH%018d", i+j), Stream: "BENCH", Sequence: uint64(i + j + 1),
						Subject: "bench.pay", Data: []byte(fmt.Sprintf(`{"account":"acct-%d","amount":%d}`, (i+j)%100, j))}
				}
				_, pending, err := st.ApplyBatchPipelined(ctx, batch[:n], balanceHandler, ledger.Budget{})
				if err == nil {
					err = pending.Durable(ctx)
				}
				if err != nil {
					b.Fatal(err)
				}
				i += n
			}
		})
	}
}
