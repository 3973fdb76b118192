package main

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jetledger/jetledger/internal/say"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/service"
	"github.com/jetledger/jetledger/sqlhandler"
	"github.com/jetledger/jetledger/stream"
)

// The stream package's typed errors say the flags themselves with the
// names run gives the service (runNames under Hub and Effects) and
// ledger prune its pruner (pruneNames), inside whatever the callers
// wrapped around them. (The SQL handler's: sqlhandler's
// TestNamesNameTheFields, and sqlUsage below.)
func TestStreamRefusalsNameTheFlags(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	busy := fmt.Errorf("database is locked: %w", ledger.ErrBusy)
	hub, fx := say.Under(runNames.Settings, "Hub"), say.Under(runNames.Settings, "Effects")
	tests := []struct {
		name string
		err  error
		is   error
		want string
	}{
		{name: "no floor", err: &stream.NoFloorError{Stream: "EV", Rows: 7, Source: "EV@hub", Hub: "EV", Names: hub}, is: stream.ErrNoFloor,
			want: stream.ErrNoFloor.Error() + ": stream EV is missing, and this ledger holds 7 rows of it but no record of where in EV@hub the rows it pruned end (an earlier jetledger pruned it without one); copied from its start, EV would apply those messages a second time: " +
				"give --hub-start-seq with EV's sequence of the first message this ledger has not applied (1 if it never pruned this stream), or bring the stream's store back"},
		{name: "not the instance", err: &stream.NotTheInstanceError{Stream: "PAY", Created: created, Served: "2025-01-01T00:00:00Z", Names: pruneNames}, is: stream.ErrNotTheInstance,
			want: stream.ErrNotTheInstance.Error() + ": stream PAY here was created 2026-01-02T03:04:05.000000006Z, the one this ledger served 2025-01-01T00:00:00Z (another server's stream of that name, or one made again since): point --nats at the server run consumes, or run on this stream first, which records it"},
		{name: "effects stream not created", err: &stream.EffectsError{Op: "create", Subject: "e.x", Stream: "OUT", Err: busy, Names: fx}, is: ledger.ErrBusy,
			want: "create --effects-stream OUT: database is locked: " + ledger.ErrBusy.Error()},
		{name: "effects stream not found", err: &stream.EffectsError{Op: "find", Subject: "e.x", Stream: "OUT", Err: busy, Names: fx}, is: ledger.ErrBusy,
			want: "find the stream for --effects-subject e.x: database is locked: " + ledger.ErrBusy.Error()},
	}
	for _, tt := range tests {
		got := usageError{fmt.Errorf("before: %w (after)", tt.err)}
		if want := "before: " + tt.want + " (after)"; got.Error() != want {
			t.Errorf("%s:\n got %q\nwant %q", tt.name, got, want)
		}
		if !errors.Is(got, tt.is) {
			t.Errorf("%s: %v lost what the error is", tt.name, got)
		}
	}
}

// sqlUsage says the SQL handler's errors, as the service returns them,
// with the flags, bad SQL a usage error and the ledger's condition not.
func TestSQLUsageNamesTheFlags(t *testing.T) {
	t.Parallel()
	busy := fmt.Errorf("database is locked: %w", ledger.ErrBusy)
	tests := []struct {
		name  string
		err   error
		usage bool
		want  string
	}{
		{"schema could not run", &sqlhandler.ConditionError{Field: "Schema", Name: "s.sql", Err: busy, Names: sqlNames}, false,
			"--schema s.sql could not run: database is locked: " + ledger.ErrBusy.Error() + " (the ledger, not the SQL: another process may hold its writer)"},
		{"apply could not be checked", &sqlhandler.ConditionError{Field: "Apply", Err: busy, Names: sqlNames}, false,
			"--apply could not be checked: database is locked: " + ledger.ErrBusy.Error() + " (the ledger, not the SQL: another process may hold its writer)"},
		{"apply does not compile", &sqlhandler.CheckError{Kind: sqlhandler.ErrApplyInvalid, Err: busy, Names: sqlNames}, true,
			"--apply does not compile: database is locked: " + ledger.ErrBusy.Error() + " (tables it uses must exist: create them with --schema)"},
	}
	for _, tt := range tests {
		got := sqlUsage(&service.StepError{Step: service.StepSQL, Err: tt.err})
		if got.Error() != tt.want || errors.As(got, new(usageError)) != tt.usage || !errors.Is(got, ledger.ErrBusy) {
			t.Errorf("%s: sqlUsage\n got %q\nwant %q (usage error: %t)", tt.name, got, tt.want, tt.usage)
		}
	}
}
