package ledger_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/jetledger/jetledger/ledger"
)

// TestEnqueueToAnUnknownSinkFails: with Config.Sinks set, an effect for a
// misspelt sink is an error in the handler at once, not a row queued for
// ever; without it, any name is taken as before.
func TestEnqueueToAnUnknownSinkFails(t *testing.T) {
	t.Parallel()
	st := open(t, filepath.Join(t.TempDir(), "l.db"), ledger.Config{Sinks: []string{"webhook"}})
	enqueue := func(sink string) error {
		var err error
		if _, aerr := st.ApplyBatch(context.Background(), []ledger.Delivery{delivery("m-"+sink, 1, "x")},
			func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
				_, err = tx.Enqueue(ctx, sink, d.Data)
				if err == nil {
					_, err = tx.EnqueueSuppressed(ctx, sink, d.Data)
				}
				return nil
			}, ledger.Budget{}); aerr != nil {
			t.Fatal(aerr)
		}
		return err
	}
	if err := enqueue("webhook"); err != nil {
		t.Fatalf("Enqueue to webhook: %v", err)
	}
	if err := enqueue("webhok"); !errors.Is(err, ledger.ErrUnknownSink) {
		t.Fatalf("Enqueue to webhok: %v, want ErrUnknownSink", err)
	}
	if _, err := ledger.Open(filepath.Join(t.TempDir(), "e.db"), ledger.Config{Sinks: []string{""}}); !errors.Is(err, ledger.ErrInvalidConfig) {
		t.Fatalf("Open with an empty sink name: %v, want ErrInvalidConfig", err)
	}
	loose := open(t, filepath.Join(t.TempDir(), "any.db"), ledger.Config{})
	if _, err := loose.ApplyBatch(context.Background(), []ledger.Delivery{delivery("m", 1, "x")},
		func(ctx context.Context, tx *ledger.Tx, d ledger.Delivery) error {
			_, err := tx.Enqueue(ctx, "anything", d.Data)
			return err
		}, ledger.Budget{}); err != nil {
		t.Fatal(err)
	}
}
