package stream_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/stream"
)

// The refusals say their advice in Names' words (run's flags here), or
// the Go API's without them, and keep what they are.
func TestErrorsSayNames(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	busy := fmt.Errorf("database is locked: %w", ledger.ErrBusy)
	floor := func(n map[string]string) error {
		return &stream.NoFloorError{Stream: "EV", Rows: 7, Source: "EV@hub", Hub: "EV", Names: n}
	}
	inst := func(n map[string]string) error {
		return &stream.NotTheInstanceError{Stream: "PAY", Created: created, Served: "2025-01-01T00:00:00Z", Names: n}
	}
	fx := func(op string) func(map[string]string) error {
		return func(n map[string]string) error {
			return &stream.EffectsError{Op: op, Subject: "e.x", Stream: "OUT", Err: busy, Names: n}
		}
	}
	const noFloor = ": stream EV is missing, and this ledger holds 7 rows of it but no record of where in EV@hub the rows it pruned end (an earlier jetledger pruned it without one); copied from its start, EV would apply those messages a second time: give "
	const floorEnd = " with EV's sequence of the first message this ledger has not applied (1 if it never pruned this stream), or bring the stream's store back"
	const notInst = ": stream PAY here was created 2026-01-02T03:04:05.000000006Z, the one this ledger served 2025-01-01T00:00:00Z (another server's stream of that name, or one made again since): "
	tests := []struct {
		name  string
		err   func(map[string]string) error
		names map[string]string
		is    error
		want  string
	}{
		{"no floor", floor, map[string]string{"Start": "--hub-start-seq"}, stream.ErrNoFloor,
			stream.ErrNoFloor.Error() + noFloor + "--hub-start-seq" + floorEnd},
		{"no floor, fields", floor, nil, stream.ErrNoFloor, stream.ErrNoFloor.Error() + noFloor + "Sourced.Start" + floorEnd},
		{"not the instance", inst, map[string]string{"NATS": "--nats", "Run": "run"}, stream.ErrNotTheInstance,
			stream.ErrNotTheInstance.Error() + notInst + "point --nats at the server run consumes, or run on this stream first, which records it"},
		{"not the instance, Go", inst, nil, stream.ErrNotTheInstance, stream.ErrNotTheInstance.Error() + notInst +
			"read the server whose stream this ledger served, or record this stream as the one it serves (ledger.Store.RememberConsumer, as jetledger run does)"},
		{"effects stream not created", fx("create"), map[string]string{"Stream": "--effects-stream"}, ledger.ErrBusy,
			"create --effects-stream OUT: database is locked: " + ledger.ErrBusy.Error()},
		{"effects stream not created, fields", fx("create"), nil, ledger.ErrBusy,
			"stream: ensure effects: create Effects.Stream OUT: database is locked: " + ledger.ErrBusy.Error()},
		{"effects stream not found", fx("find"), map[string]string{"Subject": "--effects-subject"}, ledger.ErrBusy,
			"find the stream for --effects-subject e.x: database is locked: " + ledger.ErrBusy.Error()},
		{"effects stream not found, fields", fx("find"), nil, ledger.ErrBusy,
			"stream: ensure effects: find the stream for Effects.Subject e.x: database is locked: " + ledger.ErrBusy.Error()},
	}
	for _, tt := range tests {
		err := tt.err(tt.names)
		if err.Error() != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.name, err, tt.want)
		}
		if !errors.Is(err, tt.is) {
			t.Errorf("%s: %v does not match %v", tt.name, err, tt.is)
		}
	}
}
