package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/jetledger/jetledger/internal/demo"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/ledger"
)

// FuzzApplyBinding runs arbitrary payloads, subjects and ids through the
// built-in handler with a balance --apply: no panic; a payload that is not
// JSON is applied only if SQLite reads it as JSON5, and is otherwise a
// permanent (Term) failure; a JSON one either applies or fails with
// an ordinary (retryable) error, and a failure leaves nothing behind.
func FuzzApplyBinding(f *testing.F) {
	f.Add([]byte(`{"account":"a","amount":5}`), "ev.pay", "id-1")
	f.Add([]byte(`{"account":"a","amount":"five"}`), "ev.pay", "id-2")
	f.Add([]byte(`{"account":null,"amount":5}`), "ev", "id-3")
	f.Add([]byte(`not json`), "ev", "id-4")
	f.Add([]byte(`{"account":"a","amount":1e308}`), "", "'; DROP TABLE balances; --")
	f.Add([]byte(`[]`), "ev", "\x00")
	f.Add([]byte(`{account:'a',amount:5,}`), "ev", "json5")
	f.Add([]byte("{\"account\":\"a\",\"amount\":5}\x00{\"account\":\"a\",\"amount\":1000}"), "ev", "nul")
	st, err := ledger.Open(filepath.Join(f.TempDir(), "fuzz.db"), ledger.Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	ctx := context.Background()
	if _, err := st.DB().ExecContext(ctx, demo.Schema); err != nil {
		f.Fatal(err)
	}
	h, err := newEventsHandler(ctx, st, "", demo.Apply)
	if err != nil {
		f.Fatal(err)
	}
	var seq atomic.Int64
	f.Fuzz(func(t *testing.T, data []byte, subject, id string) {
		// One ledger serves every input: make each id new, or the ledger
		// rightly answers duplicate or conflict.
		id = fmt.Sprintf("%d-%s", seq.Add(1), id)
		res, err := st.ApplyBatch(ctx, []ledger.Delivery{{MessageID: id, Stream: "F", Sequence: 1, Subject: subject, Data: data}}, h.Handle, ledger.Budget{})
		if err != nil {
			t.Fatalf("batch error: %v", err)
		}
		r := res[0]
		var term *consumer.TermError
		if !json.Valid(data) {
			// SQLite reads JSON5 too: such a payload may be applied. Any
			// other that --apply fails on is dead-lettered at once, not
			// tried again.
			if r.Outcome == ledger.Applied {
				if bytes.IndexByte(data, 0) >= 0 {
					t.Fatalf("payload with a NUL was applied: SQLite reads its JSON only up to the NUL")
				}
				var json5 int
				if err := st.DB().QueryRowContext(ctx, `SELECT json_valid(?, 2)`, string(data)).Scan(&json5); err != nil || json5 != 1 {
					t.Fatalf("invalid JSON, not JSON5 either (%v), was applied", err)
				}
				return
			}
			if !errors.As(r.Err, &term) {
				t.Fatalf("invalid JSON: outcome %v, err %v; want a Term failure", r.Outcome, r.Err)
			}
			return
		}
		if r.Outcome == ledger.Failed && errors.As(r.Err, &term) {
			t.Fatalf("valid JSON failed permanently: %v", r.Err)
		}
		var n int
		st.DB().QueryRowContext(ctx, `SELECT count(*) FROM events WHERE message_id = ?`, id).Scan(&n)
		if r.Outcome == ledger.Failed && n != 0 {
			t.Fatalf("failed message left an events row")
		}
	})
}
