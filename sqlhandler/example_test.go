package sqlhandler_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/sqlhandler"
)

func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sqlhandler-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	st, err := ledger.Open(filepath.Join(dir, "ledger.db"), ledger.Config{})
	if err != nil {
		panic(err)
	}
	defer st.Close()

	h, err := sqlhandler.New(ctx, st, sqlhandler.Config{
		Schema: `CREATE TABLE IF NOT EXISTS balances (account TEXT PRIMARY KEY, amount INTEGER NOT NULL)`,
		Apply: `INSERT INTO balances VALUES (json_extract(:data, '$.account'), json_extract(:data, '$.amount'))
			ON CONFLICT (account) DO UPDATE SET amount = amount + excluded.amount`,
	})
	if err != nil {
		panic(err)
	}
	// The consumer applies each batch it fetches this way (consumer.Config's Handler).
	batch := []ledger.Delivery{
		{MessageID: "m1", Stream: "EVENTS", Sequence: 1, Subject: "ev.deposit", Data: []byte(`{"account":"alice","amount":30}`), Delivered: 1},
		{MessageID: "m2", Stream: "EVENTS", Sequence: 2, Subject: "ev.deposit", Data: []byte(`{"account":"alice","amount":12}`), Delivered: 1},
		{MessageID: "m3", Stream: "EVENTS", Sequence: 3, Subject: "ev.deposit", Data: []byte(`not json`), Delivered: 1},
	}
	res, err := st.ApplyBatch(ctx, batch, h.Handle, ledger.Budget{})
	if err != nil {
		panic(err)
	}
	for _, r := range res {
		fmt.Println(r.Outcome, "not JSON:", errors.Is(r.Err, sqlhandler.ErrNotJSON))
	}
	var amount int
	if err := st.DB().QueryRowContext(ctx, `SELECT amount FROM balances WHERE account = 'alice'`).Scan(&amount); err != nil {
		panic(err)
	}
	fmt.Println("alice:", amount)
	// Output:
	// applied not JSON: false
	// applied not JSON: false
	// failed not JSON: true
	// alice: 42
}
