package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/jetledger/jetledger/ledger"
)

func ExampleStore_ApplyBatch() {
	dir, _ := os.MkdirTemp("", "ledger-example-*")
	defer os.RemoveAll(dir)
	st, err := ledger.Open(filepath.Join(dir, "app.db"), ledger.Config{})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	st.DB().Exec(`CREATE TABLE counter (n INTEGER)`)
	st.DB().Exec(`INSERT INTO counter VALUES (0)`)
	incr := func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
		_, err := tx.ExecContext(ctx, `UPDATE counter SET n = n + 1`)
		return err
	}
	msg := ledger.Delivery{MessageID: "01J0000000000000000000000A", Stream: "S", Sequence: 1, Subject: "s", Data: []byte(`{}`)}
	other := msg
	other.Data = []byte(`{"changed":true}`)
	// The same message delivered twice in a batch, then once more with another payload.
	results, _ := st.ApplyBatch(context.Background(), []ledger.Delivery{msg, msg, other}, incr, ledger.Budget{})
	for _, r := range results {
		fmt.Println(r.Outcome)
	}
	var n int
	st.DB().QueryRow(`SELECT n FROM counter`).Scan(&n)
	fmt.Println("counter:", n)
	// Output:
	// applied
	// duplicate
	// conflict
	// counter: 1
}

// EnqueuePayload sends every applied message on: its payload becomes an
// outbox row of the sink, committed with the message's ledger row.
func ExampleEnqueuePayload() {
	dir, _ := os.MkdirTemp("", "ledger-example-*")
	defer os.RemoveAll(dir)
	st, err := ledger.Open(filepath.Join(dir, "app.db"), ledger.Config{Sinks: []string{"webhook"}})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	msg := ledger.Delivery{MessageID: "01J0000000000000000000000A", Stream: "S", Sequence: 1, Subject: "s", Data: []byte(`{"n":1}`)}
	st.ApplyBatch(context.Background(), []ledger.Delivery{msg, msg}, ledger.EnqueuePayload("webhook"), ledger.Budget{})
	items, _ := st.ListOutbox(context.Background(), ledger.StatusQueued, 10)
	for _, it := range items {
		fmt.Println(it.Sink, string(it.Payload))
	}
	// A typo in the sink's name fails the message at once.
	typo := ledger.Delivery{MessageID: "01J0000000000000000000000B", Stream: "S", Sequence: 2, Subject: "s"}
	results, _ := st.ApplyBatch(context.Background(), []ledger.Delivery{typo}, ledger.EnqueuePayload("webhok"), ledger.Budget{})
	fmt.Println(results[0].Outcome, errors.Is(results[0].Err, ledger.ErrUnknownSink))
	// Output:
	// webhook {"n":1}
	// failed true
}
