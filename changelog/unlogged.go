package changelog

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/jetledger/jetledger/ledger"
)

// A ledger's owner commits a batch while the batch's entry is still on
// its way to the log (ledger.EntryAppender), and acknowledges and sends
// nothing of it until the entry is there. A file whose last batch's entry
// may not have landed (the owner crashed, or was fenced, meanwhile) is
// settled against the log before anything else reads its position: the
// batch is undone when the log lacks its entry, kept when it holds it.

// settle settles st's unlogged batch, if it has one (ledger.Unlogged).
func (l *Log) settle(ctx context.Context, st *ledger.Store) error {
	u, ok, err := st.Unlogged(ctx)
	if err != nil || !ok {
		return err
	}
	v, err := l.verdict(ctx, u)
	if err != nil {
		return err
	}
	l.said(ctx, u, v)
	return st.SettleUnlogged(ctx, u, v == lacking)
}

// Settle settles the unlogged batch of the ledger file at file, not open
// (Prepare does it first): only a batch the log lacks needs the file
// opened, to be undone. A run that lost its partition and leaves calls it
// too, so that its file holds nothing the log lacks.
func (l *Log) Settle(ctx context.Context, file string) error {
	u, ok, err := unloggedOf(ctx, file)
	if err != nil || !ok {
		return err
	}
	v, err := l.verdict(ctx, u)
	if err != nil || v != lacking {
		return err // kept: CatchUp settles it when the file is open
	}
	st, err := ledger.Open(file, ledger.Config{Logger: l.log})
	if err != nil {
		return err
	}
	l.said(ctx, u, v)
	return errors.Join(st.SettleUnlogged(ctx, u, true), st.Close())
}

// verdict is what the log says of an unlogged batch's entry.
type verdict int

const (
	landed  verdict = iota // the log holds it: the batch is kept
	lacking                // the log lacks it for certain: the batch is undone
	unknown                // it cannot be told: kept, the file's copy being the one there is
)

// verdict says whether this log holds the entry of the unlogged batch u:
// lacking when its last entry is before it, or another entry is in its
// place. A batch whose entry's place the log no longer holds (purged) is
// unknown: the lifecycle takes the file as it would any other.
func (l *Log) verdict(ctx context.Context, u ledger.Unlogged) (verdict, error) {
	if u.Log != l.instance {
		return l.madeAgain(ctx, u)
	}
	info, err := l.info(ctx)
	if err != nil {
		return unknown, err
	}
	if info.State.LastSeq < u.Seq {
		return lacking, nil
	}
	var id string
	if err := retried(ctx, func() (err error) { id, err = l.idOf(ctx, u.Seq); return err }); err != nil {
		return unknown, err
	}
	switch id {
	case u.Entry:
		return landed, nil
	case "":
		return unknown, nil
	}
	return lacking, nil
}

// madeAgain is the verdict on a batch of an earlier instance of the log
// (deleted, made again): lacking when this one began from the entry the
// batch follows, as its snapshot says. That copy lacked the batch, and a
// copy begins a log only holding every message the durable acknowledged
// (Config.Acked): none of the batch's was. Undone, the file is where the
// new log began, and restores its snapshot; kept, it would hold entries no
// log holds and wait for a person. Otherwise unknown: the file may begin
// the log itself, or holds more than the batch past where the log began.
func (l *Log) madeAgain(ctx context.Context, u ledger.Unlogged) (verdict, error) {
	snap, err := l.stored(ctx)
	if err != nil {
		return unknown, err
	}
	if snap.found && snap.Log == l.instance && snap.Origin.Log == u.Log && snap.Origin.Seq == u.After {
		return lacking, nil
	}
	return unknown, nil
}

// said logs how an unlogged batch is settled.
func (l *Log) said(ctx context.Context, u ledger.Unlogged, v verdict) {
	switch v {
	case lacking:
		l.log.WarnContext(ctx, "changelog: the ledger's last batch never reached the log: undone (none of its messages was acknowledged, nothing of it sent); they are delivered again",
			"log", l.name, "entry", u.Seq)
	case unknown:
		l.log.InfoContext(ctx, "changelog: whether the ledger's last batch reached the log cannot be told (the log made again, or the entry purged): kept", "log", l.name, "entry", u.Seq, "batch_log", u.Log)
	default:
		l.log.DebugContext(ctx, "changelog: the ledger's last batch is in the log", "log", l.name, "entry", u.Seq)
	}
}

// copyLogged refuses a copy of st, at file, whose last batch's entry is
// not in the log: a snapshot holds only what the log does. The entry of
// the copy's batch has landed or failed once st's last one has.
func (l *Log) copyLogged(ctx context.Context, st *ledger.Store, file string) error {
	u, ok, err := unloggedOf(ctx, file)
	if err != nil || !ok {
		return err
	}
	if _, _, err := st.Unlogged(ctx); err != nil {
		return err
	}
	switch v, err := l.verdict(ctx, u); {
	case err != nil:
		return err
	case v == lacking:
		return fmt.Errorf("%w: the ledger's last batch, entry %d, never reached the log: no snapshot of it", ErrFenced, u.Seq)
	}
	return nil
}

// unloggedOf reads the unlogged batch of the ledger file at file, not
// open (ok false: none, or no file, or one of a schema before it). Only
// that row: the rest of the file's state (readFile) counts its rows.
func unloggedOf(ctx context.Context, file string) (u ledger.Unlogged, ok bool, err error) {
	if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
		return u, false, nil
	}
	db, err := openToRead(ctx, file)
	if err != nil {
		return u, false, err
	}
	defer db.Close()
	u, ok, err = ledger.ScanUnlogged(db.QueryRowContext(ctx, ledger.UnloggedQuery))
	if missingTable(err) {
		return u, false, nil
	}
	if err != nil {
		return u, false, fmt.Errorf("changelog: read %s: %w", file, err)
	}
	return u, ok, nil
}
