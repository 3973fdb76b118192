package ledger

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
)

// Defaults for pruning, reasoned in README.md: a row may go only when no
// redelivery and no late republish of its id can still arrive.
const (
	// RetentionDefault keeps processed_messages rows a week after they are
	// applied: longer than the retry horizon of webhook providers that
	// re-send the same event id (up to three days), and than any duplicate
	// window in practice.
	RetentionDefault = 7 * 24 * time.Hour
	// OutboxRetentionDefault keeps sent and cancelled outbox rows for audit.
	OutboxRetentionDefault = 30 * 24 * time.Hour
)

// PruneHoldDefault is PruneOptions.Hold when it is zero: the default
// plan's (ackwait.Plan.PruneHold). About one batch's commit, so a batch
// waits behind a prune step little longer than behind another batch.
const PruneHoldDefault = 25 * time.Millisecond

// pruneRest is how long a prune rests after a step during which a batch
// asked for the writer, or another process wrote, in steps' lengths: while
// batches want the writer, a prune takes at most a fifth of its time, and
// pruning a week of rows costs the batches at most a fifth of their
// throughput. Otherwise it rests a quarter of a step (pacer).
const pruneRest = 4

// PruneOptions bounds a prune of one stream's ledger rows.
type PruneOptions struct {
	// Stream whose rows are pruned. Required.
	Stream string
	// FirstSeq is the stream's first sequence now: a row whose id was last
	// seen at or above it has a copy still in the stream, which can be
	// redelivered or replayed, so it is never pruned.
	FirstSeq uint64
	// DuplicateWindow is the stream's: an id younger than that may still be
	// re-published and dropped by the stream, so rows this young stay too.
	DuplicateWindow time.Duration
	// Retention is the least time since a pruned row's id was last seen.
	// Default RetentionDefault; it must not be shorter than DuplicateWindow.
	Retention time.Duration
	// OutboxRetention is the least age (since the last change) of a pruned
	// sent or cancelled outbox row. Default OutboxRetentionDefault.
	OutboxRetention time.Duration
	// Unconsumed is when the oldest message of the stream that the consumer
	// has not handled yet was stored (zero: there is none). A copy of an id
	// in it may still meet its row, so the retention counts back from it
	// rather than from now: nothing is pruned that such a copy would need.
	Unconsumed time.Time
	// AlsoFrom names tables keyed by a message_id column whose rows follow
	// the ledger's retention: they are deleted with the pruned ids, in the
	// same transaction (the built-in events table, say).
	AlsoFrom []string
	// Floors, for a stream that copies others (sources them), are each
	// source's sequence of its first message in the stream at or after
	// FirstSeq: one per source, since sourcing keeps each source's order
	// but none across them. They are recorded before any row goes (see
	// RaiseSourceFloors), so the record never lags the rows removed. None
	// for a stream that copies none.
	Floors []SourceFloor
	// Hold is the longest one prune step holds the single writer; a batch
	// waiting for the writer spends its deadline meanwhile. Default
	// PruneHoldDefault; give a consumer's ackwait.Plan.PruneHold().
	Hold time.Duration
}

// PruneResult says what a prune removed.
type PruneResult struct {
	Processed  int64 `json:"processed"`   // processed_messages rows
	Outbox     int64 `json:"outbox"`      // sent and cancelled outbox rows
	FreedPages int64 `json:"freed_pages"` // pages returned to the file system
	// Steps is how many transactions the prune took, and Held the time
	// they held the writer in all; the rest of its time it rested while
	// batches wrote.
	Steps int           `json:"steps"`
	Held  time.Duration `json:"held_ns"`
}

// Prune removes processed_messages rows of o.Stream whose every copy is gone
// from the stream (the last sequence the id was seen at is below the stream's
// first sequence) and that were last seen longer ago than the retention and
// the duplicate window; an id seen in two streams is never pruned. For a
// stream that copies others, o.Floors are recorded first. Rows of
// o.AlsoFrom go with them. It also removes sent or cancelled outbox rows older
// than the outbox retention, then returns the freed pages with an incremental
// vacuum. It works in steps that each hold the writer about o.Hold at most.
func (s *Store) Prune(ctx context.Context, o PruneOptions) (PruneResult, error) {
	if o.Stream == "" {
		return PruneResult{}, fmt.Errorf("%w: no stream given", ErrUnsafePrune)
	}
	o.Retention = cmp.Or(o.Retention, RetentionDefault)
	o.OutboxRetention = cmp.Or(o.OutboxRetention, OutboxRetentionDefault)
	o.Hold = cmp.Or(o.Hold, PruneHoldDefault)
	if o.Retention < o.DuplicateWindow || o.Retention < 0 || o.OutboxRetention < 0 || o.Hold < 0 {
		return PruneResult{}, fmt.Errorf("%w: retention %s is shorter than the stream's duplicate window %s",
			ErrUnsafePrune, o.Retention, o.DuplicateWindow)
	}
	also, err := s.keyedTables(ctx, o.AlsoFrom)
	if err != nil {
		return PruneResult{}, err
	}
	if err := s.RaiseSourceFloors(ctx, o.Stream, o.Floors); err != nil {
		return PruneResult{}, err
	}
	now := s.cfg.Now()
	from := now
	if !o.Unconsumed.IsZero() && o.Unconsumed.Before(now) {
		from = o.Unconsumed
	}
	cutoff := from.Add(-max(o.Retention, o.DuplicateWindow)).UnixMilli()
	var res PruneResult
	if res.Processed, err = s.pruneRows(ctx, o, cutoff, also, &res); err != nil {
		return res, fmt.Errorf("ledger: prune processed_messages: %w", err)
	}
	// A cancelled row with a delete still pending is not finished business.
	outboxCutoff := now.Add(-o.OutboxRetention).UnixMilli()
	collectOutbox := func(tx *sql.Tx, limit int) (sql.Result, error) {
		return tx.ExecContext(ctx, `INSERT INTO temp.prune_ids (id) SELECT id FROM outbox
			WHERE status IN ('sent', 'cancelled') AND pending_delete = 0 AND updated_at < ? LIMIT ?`, outboxCutoff, limit)
	}
	if res.Outbox, err = s.pruneInSteps(ctx, o.Hold, &res, collectOutbox,
		[]string{`DELETE FROM outbox WHERE id IN ` + pruneSlice}); err != nil {
		return res, fmt.Errorf("ledger: prune outbox: %w", err)
	}
	res.FreedPages, err = s.vacuumInSteps(ctx, o.Hold, &res)
	return res, err
}

// pruneRows prunes the ledger rows of both layouts, then drops the runs
// of fingerprints with no row left.
func (s *Store) pruneRows(ctx context.Context, o PruneOptions, cutoff int64, also []string, res *PruneResult) (int64, error) {
	// Each step collects a chunk of ids in a temporary table and deletes them
	// everywhere; the chunk grows or shrinks to keep a step within o.Hold.
	var total int64
	for _, t := range ledgerRowTables {
		seq, del := "seq", `DELETE FROM processed_messages WHERE seq IN (SELECT seq FROM temp.prune_ids WHERE id BETWEEN ?1 AND ?2)`
		if t == "processed_messages_v1" {
			seq, del = "NULL", `DELETE FROM processed_messages_v1 WHERE message_id IN `+pruneSlice
		}
		steps := append([]string{del}, also...)
		collect := func(tx *sql.Tx, limit int) (sql.Result, error) {
			return tx.ExecContext(ctx, `INSERT OR IGNORE INTO temp.prune_ids (id, seq, stream_seq) SELECT message_id, `+seq+`, stream_seq FROM `+t+`
				WHERE stream = ? AND last_seq < ? AND last_seen_at < ? LIMIT ?`, o.Stream, int64(o.FirstSeq), cutoff, limit)
		}
		n, err := s.pruneInSteps(ctx, o.Hold, res, collect, steps)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, interpret(s.dropEmptyRuns(ctx, res))
}

// dropEmptyRuns drops the runs of fingerprints whose rows are all pruned,
// one a transaction (about 1 MB of the changelog and 50 ms of the writer),
// resting after each as prune's steps do: a prune that emptied 55 runs in
// one transaction held the writer seconds, past AckWait.
func (s *Store) dropEmptyRuns(ctx context.Context, res *PruneResult) error {
	p := &pacer{s: s, res: res, version: -1}
	for {
		p.asking()
		dropped, err := s.dropEmptyRun(ctx, p)
		if err != nil || !dropped {
			return err
		}
		if _, err := p.rest(ctx); err != nil {
			return err
		}
	}
}

// dropEmptyRun drops the oldest run whose rows are all pruned, if any.
func (s *Store) dropEmptyRun(ctx context.Context, p *pacer) (bool, error) {
	tx, err := s.write(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	if err := p.holding(ctx, tx); err != nil {
		return false, err
	}
	var first, chunk0, chunks int64
	err = tx.QueryRowContext(ctx, `SELECT first, chunk0, length(los) / 8 FROM processed_runs r
		WHERE NOT EXISTS (SELECT 1 FROM processed_messages WHERE seq BETWEEN r.first AND r.last) ORDER BY first LIMIT 1`).Scan(&first, &chunk0, &chunks)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM processed_fingerprints WHERE chunk BETWEEN ? AND ?`, chunk0, chunk0+chunks-1); err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM processed_runs WHERE first = ?`, first); err != nil {
		return false, err
	}
	return true, tx.Commit()
}

// keyedTables checks that each table exists and has a message_id column, and
// returns the statement of a prune step that deletes a slice's ids from it.
// A table with a stream_seq column (the built-in handler's events) is
// deleted from by it too: its id may have no index (sqlhandler's
// eventsSchema), and the row's stream_seq is its ledger row's.
func (s *Store) keyedTables(ctx context.Context, tables []string) ([]string, error) {
	var out []string
	for _, t := range tables {
		var n, seq int
		if err := s.reader.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE name = 'message_id'), count(*) FILTER (WHERE name = 'stream_seq')
			FROM pragma_table_info(?)`, t).Scan(&n, &seq); err != nil {
			return nil, fmt.Errorf("ledger: prune: table %q: %w", t, err)
		}
		if n != 1 {
			return nil, fmt.Errorf("%w: table %q has no message_id column", ErrUnsafePrune, t)
		}
		del := `DELETE FROM "` + strings.ReplaceAll(t, `"`, `""`) + `" WHERE message_id IN ` + pruneSlice
		if seq == 1 {
			del += ` AND stream_seq IN (SELECT stream_seq FROM temp.prune_ids WHERE id BETWEEN ?1 AND ?2)`
		}
		out = append(out, del)
	}
	return out, nil
}

// pruneSlice is the ids of one slice of a step's chunk, between ?1 and ?2.
const pruneSlice = `(SELECT id FROM temp.prune_ids WHERE id BETWEEN ?1 AND ?2)`

// pruneSliceIDs is how many ids a step deletes between two looks at
// whether a batch waits for the writer: a millisecond or two of random
// leaves, which is how long such a batch waits behind the prune.
const pruneSliceIDs = 32

// pruneInSteps runs transactions that each collect up to a chunk of ids with
// collect and run steps on them, until a chunk comes back short, counting
// them in res. It returns how many ids were done.
func (s *Store) pruneInSteps(ctx context.Context, hold time.Duration, res *PruneResult, collect func(*sql.Tx, int) (sql.Result, error), steps []string) (int64, error) {
	var total int64
	chunk := 256
	p := &pacer{s: s, res: res, version: -1}
	for {
		p.asking()
		st, err := s.pruneStep(ctx, p, chunk, hold, collect, steps)
		if err != nil {
			return total, interpret(err)
		}
		total += st.done
		if !st.cut && st.collected < chunk {
			p.count()
			return total, nil
		}
		took, err := p.rest(ctx)
		if err != nil {
			return total, err
		}
		if st.cut { // ended early for a batch: no longer than what it got done
			chunk = max(min(chunk, 2*int(st.done)), 16)
		} else {
			chunk = nextChunk(chunk, took, s.stepTarget(hold))
		}
	}
}

// pacer paces a prune's steps. After each it rests a quarter of the step's
// length, so that another process's writer waiting in SQLite's busy
// handler finds the lock free at times; and pruneRest times the step's
// length if a batch of this store asked for the writer since the step
// asked for it, or another connection (process) committed since the step
// before. A step's length counts from when it holds the writer, not from
// its wait behind a batch.
type pacer struct {
	s       *Store
	res     *PruneResult
	asked   int64     // s.batchAsks when the step asked for the writer
	version int64     // PRAGMA data_version in the step before; -1 before any
	other   bool      // another connection committed since the step before
	began   time.Time // when the step held the writer
}

// asking is called as a step asks for the writer.
func (p *pacer) asking() { p.asked = p.s.batchAsks.Load() }

// holding is called by the step once it holds the writer, on its
// connection or transaction.
func (p *pacer) holding(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) error {
	var v int64
	if err := q.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v); err != nil {
		return err
	}
	p.other = p.version >= 0 && v != p.version
	p.version, p.began = v, time.Now()
	return nil
}

// count counts the step just ended in the result and returns its length.
func (p *pacer) count() time.Duration {
	took := time.Since(p.began)
	p.res.Steps++
	p.res.Held += took
	return took
}

// rest counts the step just ended, rests after it, and returns its length.
func (p *pacer) rest(ctx context.Context) (time.Duration, error) {
	took := p.count()
	rest := took / 4
	if p.other || p.s.batchAsks.Load() != p.asked {
		rest = pruneRest * took
	}
	p.checkpoint(ctx)
	t := time.NewTimer(rest - time.Since(p.began.Add(took)))
	defer t.Stop()
	select {
	case <-t.C:
		return took, nil
	case <-ctx.Done():
		return took, ctx.Err()
	}
}

// checkpoint copies the WAL into the database between two steps, once it
// holds checkpointBytes, as the background checkpoint would on its next
// tick. There it runs beside the next step and the WAL is reused from its
// start only if a checkpoint ended while no transaction was open: a prune's
// steps, a rest apart, never gave it that, and the WAL grew by every step
// (43 MB of a 7 MB ledger, filling the disk the prune was to free). Here
// it ends before the next step begins. A failure is the background
// checkpoint's to say.
func (p *pacer) checkpoint(ctx context.Context) {
	if _, pending, ok := p.s.walLength(); !ok || pending < checkpointBytes {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, p.s.cfg.BusyTimeout)
	defer cancel()
	_ = p.s.checkpoint(ctx)
}

// nextChunk sizes the next step from how long the last one held the writer.
func nextChunk(chunk int, took, hold time.Duration) int {
	switch {
	case took > hold/2:
		return max(chunk/2, 16)
	case took < hold/4:
		return min(chunk*2, 1<<16)
	}
	return chunk
}

// pruneStep is one transaction of a prune: it collects up to chunk ids
// and runs steps on them, slice by slice.
func (s *Store) pruneStep(ctx context.Context, p *pacer, chunk int, hold time.Duration, collect func(*sql.Tx, int) (sql.Result, error), steps []string) (pruneStepped, error) {
	var st pruneStepped
	tx, err := s.write(ctx)
	if err != nil {
		return st, err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	if err := p.holding(ctx, tx); err != nil {
		return st, err
	}
	if _, err := tx.ExecContext(ctx, `CREATE TEMP TABLE IF NOT EXISTS prune_ids (id TEXT PRIMARY KEY, seq INTEGER, stream_seq INTEGER) WITHOUT ROWID`); err != nil {
		return st, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM temp.prune_ids`); err != nil {
		return st, err
	}
	r, err := collect(tx.Tx, chunk)
	if err != nil {
		return st, err
	}
	n, _ := r.RowsAffected()
	st.collected = int(n)
	ids, err := pruneIDs(ctx, tx.Tx)
	if err != nil {
		return st, err
	}
	// Each statement compiled once a step, not once a slice: compiling
	// was a sixth of a prune's CPU (a profile beside the batches).
	stmts := make([]*sql.Stmt, len(steps))
	for i, q := range steps {
		if stmts[i], err = tx.PrepareContext(ctx, q); err != nil {
			return st, err
		}
		defer stmts[i].Close() //nolint:errcheck // closed with the transaction anyway
	}
	// In slices, in key order (neighbouring leaves), looking between
	// slices for a batch waiting once the step has held the writer
	// cutAfter: the step ends there and commits what it did, so that batch
	// waits that long, not the whole step.
	for i := 0; i < len(ids); i += pruneSliceIDs {
		if i > 0 && s.batchWaiting.Load() > 0 && time.Since(p.began) >= s.cutAfter(hold) {
			st.cut = true
			break
		}
		lo, hi := ids[i], ids[min(i+pruneSliceIDs, len(ids))-1]
		for _, stmt := range stmts {
			if _, err := stmt.ExecContext(ctx, lo, hi); err != nil {
				return st, err
			}
		}
		st.done += int64(min(i+pruneSliceIDs, len(ids)) - i)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM temp.prune_ids`); err != nil {
		return st, err
	}
	return st, tx.Commit()
}

// cutAfter is how long a prune step holds the writer before it ends for
// a waiting batch: a quarter of a batch's own hold lately (at most hold),
// so that a batch waits at most a quarter of its length behind the prune,
// and the prune, resting four steps' lengths after, still gets about a
// fifth of the writer beside batches that follow each other without a gap.
// Cut at the first waiting batch, it got 4% beside slow ones, and a busy
// ledger would hardly shrink. At least pruneCutFloor: a step costs about a
// millisecond besides its deletes (begin, collect, commit).
func (s *Store) cutAfter(hold time.Duration) time.Duration {
	return s.batchQuarter(pruneCutFloor, hold)
}

// batchQuarter is a quarter of a batch's own hold lately, at least floor
// and at most hold: how long a prune step may keep a batch waiting.
func (s *Store) batchQuarter(floor, hold time.Duration) time.Duration {
	return min(max(s.batchHeld.get()/4, floor), hold)
}

// pruneCutFloor is the least a prune step holds the writer before it ends
// for a waiting batch.
const pruneCutFloor = 2 * time.Millisecond

// stepTarget is the hold a prune step is sized for (nextChunk): a quarter
// of a batch's own hold lately, as cutAfter, but at least pruneStepFloor
// and at most hold. Beside quick batches the prune's CPU and WAL then come
// in short bursts: sized for hold (25 ms) the same share of the writer, in
// longer bursts that every stage of the slowest batches waited behind,
// gave a p99 2.4 times its value without the prune (10M rows), against 1.4
// with 4 ms steps (BENCHMARKS.md). Beside slow batches a step has one gap
// between two of them, and grows with them to keep the prune's share.
func (s *Store) stepTarget(hold time.Duration) time.Duration {
	return s.batchQuarter(pruneStepFloor, hold)
}

// pruneStepFloor is the least hold a prune step is sized for: a step costs
// about a millisecond besides its deletes (begin, collect, commit).
const pruneStepFloor = 4 * time.Millisecond

// heldAverage is a moving average of how long batches held the writer.
type heldAverage struct{ ns atomic.Int64 }

// note adds one batch's hold, weighing it an eighth.
func (a *heldAverage) note(d time.Duration) {
	old := a.ns.Load()
	a.ns.Store(old + (int64(d)-old)/8) // one batch holds the writer at a time
}

func (a *heldAverage) get() time.Duration { return time.Duration(a.ns.Load()) }

// pruneStepped is what one prune step did: ids collected, ids deleted,
// and whether it ended early for a waiting batch.
type pruneStepped struct {
	collected int
	done      int64
	cut       bool
}

// pruneIDs reads a step's collected ids in key order.
func pruneIDs(ctx context.Context, tx *sql.Tx) ([]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id FROM temp.prune_ids ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// vacuumInSteps hands free pages back to the file system a few at a time.
func (s *Store) vacuumInSteps(ctx context.Context, hold time.Duration, res *PruneResult) (int64, error) {
	var before int64
	if err := s.writer.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&before); err != nil {
		return 0, fmt.Errorf("ledger: vacuum: %w", interpret(err))
	}
	left, pages := before, int64(256)
	p := &pacer{s: s, res: res, version: -1}
	for left > 0 {
		p.asking()
		was := left
		if err := s.vacuumStep(ctx, p, pages, &left); err != nil {
			return before - was, fmt.Errorf("ledger: vacuum: %w", interpret(err))
		}
		if left >= was { // auto_vacuum is off (a file made before it was set): nothing to hand back
			p.count()
			break
		}
		took, err := p.rest(ctx)
		if err != nil {
			return before - left, err
		}
		pages = int64(nextChunk(int(pages), took, s.stepTarget(hold)))
	}
	return before - left, nil
}

// vacuumStep hands back up to pages free pages on the writer's connection
// and reads how many are left.
func (s *Store) vacuumStep(ctx context.Context, p *pacer, pages int64, left *int64) error {
	conn, err := s.writer.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := p.holding(ctx, conn); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, fmt.Sprintf(`PRAGMA incremental_vacuum(%d)`, pages)); err != nil {
		return err
	}
	return conn.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(left)
}
