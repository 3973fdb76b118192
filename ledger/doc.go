// Package ledger is jetledger's SQLite store: the processed_messages ledger
// that makes redeliveries no-ops, the conflicts and dead_letters tables, the
// outbox, and the batch transaction that applies a handler's change in the
// same commit as the ledger row.
//
// A batch is one transaction with one SAVEPOINT per message, so one failing
// message rolls back alone while the others commit together:
//
//	st, err := ledger.Open("app.db", ledger.Config{})
//	if err != nil { ... }
//	defer st.Close()
//	results, err := st.ApplyBatch(ctx, deliveries, func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
//		_, err := tx.ExecContext(ctx, `UPDATE balances SET amount = amount + ? WHERE account = ?`, ...)
//		return err
//	}, ledger.Budget{})
//
// The outbox rows' legal changes are one table (transitions.go), each made
// by Transition as one guarded UPDATE … RETURNING. A guard on the writer
// keeps handlers from ending the transaction or changing durability.
//
// The package knows nothing of NATS; package consumer feeds it.
package ledger
