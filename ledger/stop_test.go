package ledger_test

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/jetledger/jetledger/ledger"
)

// A stop that lands in a write begun lets it commit: on a store kept by a
// changelog its commit publishes first, and a publish cut short may land
// while the commit does not (the store would fence itself, and a stopping
// run's sends in flight lose their write-backs). Before, database/sql
// rolled the transaction back at the stop, and the write failed with
// "already committed or rolled back", which a run SIGTERMed as it started
// took for a fault (exit 1). A write asked for after the stop is refused
// with context.Canceled.
func TestAStopMidWriteLetsItCommit(t *testing.T) {
	t.Parallel()
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	err = ledger.ExecStoppedMidWrite(st, `INSERT INTO jetledger_consumers (stream, durable, first_seen, last_seen) VALUES ('S', 'd', 1, 1)`)
	if cs, cerr := st.Consumers(context.Background()); err != nil || cerr != nil || len(cs) != 1 {
		t.Fatalf("stopped mid-write: %v; consumers %v (%v), want the write committed", err, cs, cerr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := st.Transition(ctx, "no-such-row", ledger.Claim, ledger.Params{Worker: "w"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("a write after the stop: %v, want context.Canceled", err)
	}
}

// A write waiting for the writer when the stop lands is refused at once,
// nothing written: only a write begun goes on beyond the stop.
func TestAStopEndsAWriteWaitingForTheWriter(t *testing.T) {
	t.Parallel()
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	release := ledger.HoldWriter(st)
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	refused := make(chan error, 1)
	go func() {
		_, err := st.Transition(ctx, "no-such-row", ledger.Claim, ledger.Params{Worker: "w"})
		refused <- err
	}()
	for ledger.WriterWaits(st) == 0 { // the write waits for the writer
		runtime.Gosched()
	}
	cancel()
	if err := <-refused; !errors.Is(err, context.Canceled) {
		t.Fatalf("a write waiting for the writer at the stop: %v, want context.Canceled", err)
	}
}
