package changelog_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// An owner beginning its log (Own: the log read empty, then its
// take-over's entry) when the log is deleted again and made again, empty,
// by the other host's look: that entry, expected at sequence 0, landed in
// the new log as if it were the one begun, and the owner wrote on into it
// under the old one's name (its snapshot, its file's copy), so neither
// host could own it again. It is refused as the log gone, and the new log
// stays empty, for the run to decide again.
func TestTheFirstEntryOfALogDeletedAndMadeAgainEmptyIsRefused(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, s)
	cfg := changelog.Config{Stream: "PAY", Durable: "pay-p0"}
	log, st := heldLogStore(ctx, t, js, js, cfg)
	if last, err := log.Last(ctx); err != nil || last != 0 {
		t.Fatalf("the log begun: last %d (%v), want empty", last, err)
	}
	name, _ := changelog.Names("PAY", "pay-p0")
	if err := js.DeleteStream(ctx, name); err != nil {
		t.Fatal(err)
	}
	ensure(t, js, cfg) // the other host's look makes it again
	err := st.TakeOverAsSoleWriter(ctx, log.Instance(), "host-a", 0, 0)
	if !errors.Is(err, changelog.ErrLogGone) {
		t.Fatalf("the take-over's entry into a log deleted and made again: %v, want ErrLogGone", err)
	}
	_, err = st.ApplyBatch(ctx, batch(0, 5, 0), credit, ledger.Budget{Work: time.Minute})
	if err == nil {
		t.Fatal("a batch after the refused take-over committed")
	}
	stream, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx, jetstream.WithDeletedDetails(false))
	if err != nil || info.State.Msgs != 0 {
		t.Fatalf("the log made again: %+v %v, want it empty", info.State, err)
	}
	if amt, n := balance(t, st); n != 0 {
		t.Fatalf("the owner's file after the refused batch: balance %d over %d messages, want nothing", amt, n)
	}
}

// heldLogStore is the log of cfg on js, its lease held by host-a (on
// raw), and a ledger written through it, not taken over yet.
func heldLogStore(ctx context.Context, t *testing.T, js, raw jetstream.JetStream, cfg changelog.Config) (*changelog.Log, *ledger.Store) {
	t.Helper()
	log := ensure(t, js, cfg)
	lease, err := changelog.OpenLease(ctx, raw, cfg.Stream, cfg.Durable, "host-a", time.Minute, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	return log, openLedger(t, filepath.Join(t.TempDir(), "a.db"), log.Owned(lease))
}
