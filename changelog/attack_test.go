package changelog_test

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// halfLog publishes only the first part of a multi-part entry (its writer
// dies mid-entry), with the headers the real Log would set.
type halfLog struct {
	*changelog.Log
	js      jetstream.JetStream
	subject string
	half    bool
}

func (h *halfLog) Append(ctx context.Context, after uint64, parts [][]byte) error {
	if !h.half || len(parts) < 2 {
		return h.Log.Append(ctx, after, parts)
	}
	m := nats.NewMsg(h.subject)
	m.Data = parts[0]
	m.Header.Set(changelog.HeaderFirst, strconv.FormatUint(after+1, 10))
	m.Header.Set(changelog.HeaderParts, strconv.Itoa(len(parts)))
	if _, err := h.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequence(after)); err != nil {
		return err
	}
	return errors.New("the writer died mid-entry")
}

func dumpAll(t *testing.T, st *ledger.Store) string {
	t.Helper()
	var out string
	for _, q := range []string{
		`SELECT group_concat(message_id, ',') FROM (SELECT message_id FROM processed_messages ORDER BY 1)`,
		`SELECT group_concat(account || '=' || amount, ',') FROM balances`,
		`SELECT group_concat(id || ':' || status, ',') FROM (SELECT id, status FROM outbox ORDER BY id)`,
		`SELECT log || '/' || seq FROM jetledger_changelog`,
	} {
		var s *string
		if err := st.DB().QueryRow(q).Scan(&s); err != nil {
			t.Fatal(err)
		}
		if s != nil {
			out += *s
		}
		out += "\n"
	}
	return out
}

// An unfinished multi-part entry followed by a new writer's entries:
// CatchUp drops the unfinished one; a standby caught up from scratch, one
// caught up to before it, and the writer whose entry it was all end with
// what the new owner holds.
func TestAttackCatchUpAcrossAnUnfinishedEntry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, s)
	dir := t.TempDir()
	cfg := changelog.Config{Stream: "PAY", Durable: "pay-p0", MaxEntry: 1 << 10}
	log := ensure(t, js, cfg)
	_, subject := changelog.Names(cfg.Stream, cfg.Durable)
	hl := &halfLog{Log: log, js: js, subject: subject}
	a := openLedger(t, filepath.Join(dir, "a.db"), hl)
	if err := a.TakeOver(ctx, log.Instance(), "a", 0, 0); err != nil {
		t.Fatal(err)
	}
	budget := ledger.Budget{Work: time.Minute}
	if _, err := a.ApplyBatch(ctx, batch(0, 10, 300), credit, budget); err != nil {
		t.Fatal(err)
	}
	early := openLedger(t, filepath.Join(dir, "early.db"), nil)
	if ap, la, err := log.CatchUp(ctx, early); err != nil || ap != la {
		t.Fatal(ap, la, err)
	}
	hl.half = true
	if _, err := a.ApplyBatch(ctx, batch(10, 10, 300), credit, budget); !errors.Is(err, ledger.ErrNotChangelogOwner) {
		t.Fatalf("the half-published batch: %v", err)
	}
	b := openLedger(t, filepath.Join(dir, "b.db"), log)
	applied, last, err := log.CatchUp(ctx, b)
	if err != nil || applied+1 != last {
		t.Fatalf("b catches up: %d %d %v, want the unfinished part after applied", applied, last, err)
	}
	if err := b.TakeOver(ctx, log.Instance(), "b", applied, last); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ApplyBatch(ctx, batch(10, 10, 300), credit, budget); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ApplyBatch(ctx, batch(20, 2, 0), credit, budget); err != nil {
		t.Fatal(err)
	}
	want := dumpAll(t, b)
	fresh := openLedger(t, filepath.Join(dir, "fresh.db"), nil)
	for name, st := range map[string]*ledger.Store{"fresh": fresh, "early": early, "a": a} {
		ap, la, err := log.CatchUp(ctx, st)
		if err != nil || ap != la {
			t.Fatalf("%s: %d %d %v", name, ap, la, err)
		}
		if got := dumpAll(t, st); got != want {
			t.Fatalf("%s holds\n%s\nthe owner\n%s", name, got, want)
		}
	}
	// the old writer's next write is refused until it takes over
	if _, err := a.ApplyBatch(ctx, batch(30, 1, 0), credit, budget); !errors.Is(err, ledger.ErrNotChangelogOwner) {
		t.Fatalf("a after catching up: %v", err)
	}
}

// A log trimmed behind a snapshot (purged): a standby that needs the
// trimmed entries must be told ErrNeedSnapshot, even when nothing is left
// after the trim.
func TestAttackCatchUpOnAPurgedLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, s)
	dir := t.TempDir()
	cfg := changelog.Config{Stream: "PAY", Durable: "pay-p0"}
	log := ensure(t, js, cfg)
	a := openLedger(t, filepath.Join(dir, "a.db"), log)
	if err := a.TakeOver(ctx, log.Instance(), "a", 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ApplyBatch(ctx, batch(0, 3, 0), credit, ledger.Budget{Work: time.Minute}); err != nil {
		t.Fatal(err)
	}
	name, _ := changelog.Names(cfg.Stream, cfg.Durable)
	str, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := str.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	fresh := openLedger(t, filepath.Join(dir, "fresh.db"), nil)
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	ap, la, err := log.CatchUp(cctx, fresh)
	if !errors.Is(err, changelog.ErrNeedSnapshot) {
		t.Fatalf("catch up on a purged log: applied %d last %d: %v, want ErrNeedSnapshot", ap, la, err)
	}
}
