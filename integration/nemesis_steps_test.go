package integration

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats.go/jetstream"
)

// do runs one step.
func (w *nemWorld) do(st nemStep) {
	w.stats.Kinds[string(st.Kind)]++
	w.stats.Steps++
	if f := nemTopologies[w.topo].steps[st.Kind]; f != nil {
		f(w, st)
		return
	}
	switch st.Kind {
	case nemPublish:
		w.publishFresh(max(st.Arg, 1))
	case nemDupIn:
		w.republish(len(w.m.order)-1, false)
	case nemDupPast:
		w.republish(st.Arg, true)
	case nemConflict:
		w.conflict(st.Arg)
	case nemNoID:
		w.publishNoID()
	case nemBad:
		w.publishBad()
	case nemKill:
		w.up()
		done := w.publishFreshAsync(max(st.Arg, 1))
		time.Sleep(time.Duration(w.rng.IntN(400)) * time.Millisecond) // the moment of the kill is the experiment's variable
		w.run.kill()
		w.startRun(nil)
		<-done
	case nemKillCommit:
		w.stopRun()
		w.startRun([]string{"JETLEDGER_FAULT=after-commit"})
		done := w.publishFreshAsync(max(st.Arg, 1))
		if code := w.run.wait(time.Minute); code != -1 {
			w.m.violate("killcommit: run exited %d, want death at the fault point", code)
		}
		w.startRun(nil)
		<-done
	case nemMidSend:
		w.midSend()
	case nemPause:
		w.pause()
	case nemBroker:
		w.b.p.kill()
		time.Sleep(time.Duration(200+w.rng.IntN(800)) * time.Millisecond) // the broker stays down a while: the experiment's variable
		w.b.start()
	case nemHang:
		w.destFault(st.Kind, w.dest.Hold, w.dest.Release)
	case nem500:
		w.destFault(st.Kind, func() { w.dest.FailAfterStoreWith(500) }, func() { w.dest.FailAfterStoreWith(0) })
	case nemStop:
		w.stopRun()
	case nemStart:
		w.up()
	case nemFlags:
		w.stopRun()
		w.batch = []string{"1", "10", "50", "100"}[st.Arg%4]
		w.deadline = []time.Duration{time.Second, 2 * time.Second}[st.Arg/4%2]
		w.startRun(nil)
	case nemPrune:
		w.prune()
	case nemReplay:
		if st.Arg == 2 && w.b != nil { // run down leaves a server to publish to
			// An operator replays while run is stopped and traffic goes on.
			w.stopRun()
			w.publishFresh(10)
		}
		w.replay(st.Arg == 1)
	case nemPurge:
		w.purge(st.Arg)
	case nemRequeue:
		w.dlq(nemRequeue, false)
	case nemDiscard:
		w.dlq(nemDiscard, false)
	case nemResolve:
		w.resolve(false)
	case nemCancel:
		w.cancel(false)
	case nemRetry:
		w.retry(false)
	case nemAPI:
		w.api(st.Arg)
	case nemHandover:
		w.handover()
	default:
		f := nemStepFuncs[st.Kind]
		if f == nil {
			w.t.Fatalf("step %s: not implemented", st)
		}
		f(w, st)
	}
}

// pick returns the i-th of n (mod n), or -1 when there is none.
func pick(i, n int) int {
	if n == 0 {
		return -1
	}
	return i % n
}

// republish sends an earlier good id again with its payload: inside the
// window the stream drops it; past it the ledger must dedupe it (or, once
// its row was pruned, it is a new message: the model counts it so).
func (w *nemWorld) republish(i int, past bool) {
	j := pick(i, len(w.m.order))
	if j < 0 {
		w.stats.NoTarget["dup"]++
		return
	}
	e := w.m.evs[w.m.order[j]]
	if past {
		time.Sleep(nemDupWindow + 50*time.Millisecond) // past the duplicate window: time is the subject here
	}
	if ack, ok := w.publishEvent(e, e.data()); ok {
		w.m.ack(e.ID, ack)
	}
}

// conflict sends an applied id with another payload past the window.
func (w *nemWorld) conflict(i int) {
	snap := w.snapshot()
	var cands []string
	for _, id := range w.m.order {
		if snap.applied[id] {
			cands = append(cands, id)
		}
	}
	j := pick(i, len(cands))
	if j < 0 {
		w.stats.NoTarget["conflict"]++
		return
	}
	e := w.m.evs[cands[j]]
	other := event{ID: e.ID, Account: e.Account, Amount: e.Amount + 1000}
	time.Sleep(nemDupWindow + 50*time.Millisecond) // past the duplicate window, or the stream drops it
	ack, ok := w.publishEvent(other, other.data())
	if ok && !ack.Duplicate {
		w.m.mu.Lock()
		w.m.conflicts[e.ID] = append(w.m.conflicts[e.ID], ack.Sequence)
		w.m.mu.Unlock()
	}
}

func (w *nemWorld) publishNoID() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ack *jetstream.PubAck
	consumertest.Eventually(w.t, 40*time.Second, "a publish without Nats-Msg-Id", func() bool {
		var err error
		ack, err = w.pubJS.Publish(ctx, w.subjectOf("acct-noid"), []byte(`{"account":"acct-noid","amount":7}`))
		return err == nil
	})
	w.stats.Published++
	w.m.mu.Lock()
	w.m.noID = append(w.m.noID, ack.Sequence)
	w.m.mu.Unlock()
}

func (w *nemWorld) publishBad() {
	e := event{ID: w.pub.NewID()}
	w.m.mu.Lock()
	w.m.bad[e.ID] = true
	w.m.mu.Unlock()
	ack, ok := w.publishEvent(e, []byte(`not json {`))
	if ok {
		w.m.mu.Lock()
		w.m.acked[e.ID] = true
		if !ack.Duplicate {
			w.m.copies[e.ID] = append(w.m.copies[e.ID], ack.Sequence)
		}
		w.m.mu.Unlock()
	}
}

// midSend kills run while the destination has stored an item and holds
// its answer: the row is left sending, and its lease must send it to review.
func (w *nemWorld) midSend() {
	w.up()
	e, stored := w.heldAtTheDestination()
	w.run.kill()
	w.dest.Release()
	if !stored {
		w.t.Logf("midsend: %s never reached the destination before the kill", e.ID)
	}
	w.startRun(nil)
}

// heldAtTheDestination publishes a fresh event and has the destination
// hold its answer once it has stored its effect: stored says whether it
// did within 30 s.
func (w *nemWorld) heldAtTheDestination() (e event, stored bool) {
	w.dest.HoldAfterStore()
	e = w.fresh(1)[0]
	if ack, ok := w.publishEvent(e, e.data()); ok {
		w.m.ack(e.ID, ack)
	}
	stored = poll(30*time.Second, func() bool {
		for _, it := range w.dest.Items() {
			if it.MessageID == e.ID {
				return true
			}
		}
		return false
	})
	return e, stored
}

// pause stops run past its AckWait while a second run of the same ledger
// and durables starts, then lets it go on. The durable's lease decides
// which of them consumes: the first, renewing on its return (the second
// waits, and is refused or stopped), or the second, which took the lease
// the pause let lapse (the first finds it taken and exits 1, and a
// supervisor starts it again: the next step's up). Either way the second
// is stopped and must exit 0 or name the lease it was refused.
func (w *nemWorld) pause() {
	w.up()
	first := w.run
	first.signal(syscall.SIGSTOP)
	second := start(w.t, w.runEnv(nil), w.runArgs(w.db)...)
	w.publishFresh(5)
	time.Sleep(w.ackWait() + time.Second) // past AckWait: the pause is the experiment
	mark := leaseMark(w.js)
	first.signal(syscall.SIGCONT)
	if !poll(time.Minute, func() bool { return exited(first) || renewedAlone(w.js, first, second, mark) }) {
		w.t.Logf("pause: within 1m neither run held the lease alone")
	}
	second.stop()
	if code := second.wait(time.Minute); code != 0 && !strings.Contains(second.output(), "one run per durable") {
		w.m.violate("pause: the second run exited %d after SIGTERM: %s", code, tail(second.output()))
	}
	if !exited(first) {
		w.t.Logf("pause: the first run kept the lease")
		return
	}
	w.t.Logf("pause: the second run took the lease; the first stopped")
	w.down = true
	if code := first.wait(0); code != 1 || !strings.Contains(first.output(), "another run took the durable's lease") {
		w.m.violate("pause: the first run exited %d, not for the lease the second took: %s", code, tail(first.output()))
	}
}

func exited(p *proc) bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// leaseMark is the lease bucket's last sequence: a key written after it
// was written after the call.
func leaseMark(js jetstream.JetStream) uint64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "KV_"+changelog.LeaseBucket)
	if err != nil {
		return 0
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0
	}
	return info.State.LastSeq
}

// renewedAlone reports whether first renewed a lease after mark while
// second holds none: renewing every quarter TTL, first keeps them then.
func renewedAlone(js jetstream.JetStream, first, second *proc, mark uint64) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, changelog.LeaseBucket)
	if err != nil {
		return false
	}
	keys, err := kv.Keys(ctx)
	if err != nil {
		return false
	}
	renewed := false
	for _, k := range keys {
		e, err := kv.Get(ctx, k)
		if err != nil {
			return false
		}
		holder := string(e.Value())
		if holds(holder, second) {
			return false
		}
		renewed = renewed || holds(holder, first) && e.Revision() > mark
	}
	return renewed
}

// holds reports whether a lease's holder (host:pid:tag) is p.
func holds(holder string, p *proc) bool {
	return strings.Contains(holder, ":"+strconv.Itoa(p.cmd.Process.Pid)+":")
}

// destFault sets a destination fault, sends two messages into it, waits for
// their outbox rows to be settled by it (sent, or in review) and lifts it.
func (w *nemWorld) destFault(kind nemKind, set, lift func()) {
	w.up()
	abandoned := w.dest.Abandoned()
	set()
	evs := w.fresh(2)
	for _, e := range evs {
		if ack, ok := w.publishEvent(e, e.data()); ok {
			w.m.ack(e.ID, ack)
		}
	}
	settled := poll(30*time.Second, func() bool {
		n := 0
		w.query(func(_ string, db *sql.DB) {
			n += count(w.t, db, `SELECT count(*) FROM outbox WHERE message_id IN (?, ?) AND status IN ('sent', 'review')`, evs[0].ID, evs[1].ID)
		})
		return n == 2
	})
	if kind == nemHang {
		// A held request whose client gave up may still store on the
		// release: wait until the destination saw each reviewed one go,
		// or a resolve that reads it first would judge it wrongly.
		var review int
		w.query(func(_ string, db *sql.DB) {
			review += count(w.t, db, `SELECT count(*) FROM outbox WHERE message_id IN (?, ?) AND status = 'review'`, evs[0].ID, evs[1].ID)
		})
		if !poll(30*time.Second, func() bool { return w.dest.Abandoned()-abandoned >= review }) {
			w.t.Logf("hang: %d held requests were not abandoned within 30s", review)
		}
	}
	lift()
	if !settled {
		w.t.Logf("%s: the rows were not settled within 30s", kind)
	}
}

// prune runs ledger prune and checks what it removed: a row whose id has a
// copy still in the stream that run already handled must stay (a later
// replay or redelivery would apply it again). What it removed rightly ends
// that id's application: a later copy is a new message. Each ledger is
// pruned against its own durable.
func (w *nemWorld) prune() {
	for _, p := range w.parts() {
		w.prunePart(p)
	}
}

func (w *nemWorld) prunePart(p nemPart) {
	w.settle()
	before := w.snapshot()
	first := w.stream().FirstSeq
	floor := w.durable(p.durable).AckFloor.Stream
	if !w.operator(nemPrune, false, "ledger", "prune", "--db", p.db, "--nats", w.url(), "--stream", stream,
		"--durable", p.durable, "--retention", nemRetention, "--json") {
		return
	}
	after := w.snapshot()
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	for id := range before.applied {
		if after.applied[id] {
			continue
		}
		for _, s := range w.m.copies[id] {
			if s >= first && s <= floor {
				w.m.violations = append(w.m.violations, fmt.Sprintf(
					"prune removed the row of %s while its copy at seq %d, handled by run (ack floor %d), is still in the stream (first seq %d)", id, s, floor, first))
			}
		}
		w.m.epochs[id]++
	}
}

// replay replays through run's ledger with run's effects: to run's bound,
// or with --to-seq the stream's last sequence; each ledger with its durable.
func (w *nemWorld) replay(toEnd bool) {
	for _, p := range w.parts() {
		args := []string{"replay", "--nats", w.url(), "--db", p.db, "--stream", stream, "--durable", p.durable, "--schema", w.schema,
			"--apply", balanceApply, "--webhook", w.dest.URL(), "--json", "--log-level", "warn", "--deadline", w.deadline.String(),
			"--buffer-wait", "200ms", "--commit-margin", "300ms", "--ack-margin", "200ms"}
		if toEnd {
			args = append(args, "--to-seq", strconv.FormatUint(w.stream().LastSeq, 10))
		}
		w.operator(nemReplay, false, args...)
	}
}

// purge purges the stream but its last keep messages: what was not handled
// yet may be gone, by the schedule's doing; what run acked before it must
// be applied or recorded still (the checker judges it).
func (w *nemWorld) purge(keep int) {
	w.settle()
	handled := w.handledFloor()
	consumertest.Eventually(w.t, 30*time.Second, "a purge", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := w.js.Stream(ctx, stream)
		return err == nil && s.Purge(ctx, jetstream.WithPurgeKeep(uint64(keep))) == nil
	})
	first := w.stream().FirstSeq
	snap := w.snapshot()
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	for id, seqs := range w.m.copies {
		for _, s := range seqs {
			if s < first && s > handled && !snap.applied[id] && !snap.deadIDs[id] {
				w.m.gone[id] = true
			}
		}
	}
	for _, seqs := range w.m.conflicts {
		for _, s := range seqs {
			if s < first && s > handled && !snap.conflicts[s] {
				w.m.goneSeq[s] = true
			}
		}
	}
	for _, s := range w.m.noID {
		if s < first && s > handled && !snap.deadSeqs[s] {
			w.m.goneSeq[s] = true
		}
	}
}

// handledFloor is the lowest ack floor of run's durables: every message at
// or below it was handled by run (applied, a duplicate, a conflict or a
// dead letter), so a purge or a delete cannot excuse its absence.
func (w *nemWorld) handledFloor() uint64 {
	floor := uint64(math.MaxUint64)
	for _, p := range w.parts() {
		floor = min(floor, w.durable(p.durable).AckFloor.Stream)
	}
	return floor
}

// dlq requeues or discards a dead letter. A requeue inside the duplicate
// window is refused (exit 1, README); one without an id is not requeued.
func (w *nemWorld) dlq(kind nemKind, api bool) {
	type dl struct {
		id  int64
		msg string
		seq uint64
		db  string
	}
	var dls []dl
	w.query(func(path string, db *sql.DB) {
		rows, err := db.Query(`SELECT id, message_id, stream_seq FROM dead_letters ORDER BY id`)
		if err != nil {
			w.t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			d := dl{db: path}
			if err := rows.Scan(&d.id, &d.msg, &d.seq); err != nil {
				w.t.Fatal(err)
			}
			if kind == nemDiscard || d.msg != "" {
				dls = append(dls, d)
			}
		}
	})
	j := pick(w.rng.IntN(1000), len(dls))
	if j < 0 {
		w.stats.NoTarget[string(kind)]++
		return
	}
	d := dls[j]
	if kind == nemRequeue {
		w.operator(kind, true, "dlq", "requeue", strconv.FormatInt(d.id, 10), "--db", d.db, "--nats", w.url())
		return
	}
	if w.operatorOn(kind, api, false, d.db, "dlq", "discard", strconv.FormatInt(d.id, 10)) {
		w.m.mu.Lock()
		if d.msg != "" {
			w.m.discarded[d.msg] = true
		}
		w.m.discSeq[d.seq] = true
		w.m.mu.Unlock()
	}
}

// nemRow is an outbox row and the ledger that holds it.
type nemRow struct {
	outboxRow
	db string
}

func (w *nemWorld) rowsIn(status string) []nemRow {
	var out []nemRow
	w.query(func(path string, db *sql.DB) {
		for _, r := range outboxRows(w.t, db) {
			if r.Status == status {
				out = append(out, nemRow{r, path})
			}
		}
	})
	return out
}

// resolve settles a review row as a person would after checking the
// destination for its key.
func (w *nemWorld) resolve(api bool) {
	rows := w.rowsIn("review")
	j := pick(w.rng.IntN(1000), len(rows))
	if j < 0 {
		w.stats.NoTarget["resolve"]++
		return
	}
	r := rows[j]
	args := []string{"outbox", "resolve", r.ID, "--as", "failed"}
	as := "failed"
	for _, it := range w.items() {
		if it.Key == r.ID {
			args = []string{"outbox", "resolve", r.ID, "--as", "sent", "--external-id", it.ExternalID}
			as = "sent"
		}
	}
	if w.operatorOn(nemResolve, api, true, r.db, args...) {
		w.m.mu.Lock()
		w.m.resolvedAs[r.ID] = as
		w.m.mu.Unlock()
	}
}

// cancel cancels a sent row: the item must go from the destination.
func (w *nemWorld) cancel(api bool) {
	rows := w.rowsIn("sent")
	j := pick(w.rng.IntN(1000), len(rows))
	if j < 0 {
		w.stats.NoTarget["cancel"]++
		return
	}
	r := rows[j]
	args := []string{"outbox", "cancel", r.ID}
	if !api { // through the API, the run's own sink deletes
		args = append(args, "--webhook-delete-url", w.dest.DeleteURL(), "--webhook-lookup-url", w.dest.LookupURL(), "--webhook-timeout", "1s")
	}
	if w.operatorOn(nemCancel, api, true, r.db, args...) {
		w.m.mu.Lock()
		w.m.cancelled[r.ID] = true
		w.m.mu.Unlock()
	}
}

func (w *nemWorld) retry(api bool) {
	rows := w.rowsIn("failed")
	j := pick(w.rng.IntN(1000), len(rows))
	if j < 0 {
		w.stats.NoTarget["retry"]++
		return
	}
	if w.operatorOn(nemRetry, api, true, rows[j].db, "outbox", "retry", rows[j].ID) {
		w.m.mu.Lock()
		delete(w.m.resolvedAs, rows[j].ID)
		w.m.mu.Unlock()
	}
}

// handover stops run, backs the ledger up and runs on the copy.
func (w *nemWorld) handover() {
	w.stopRun()
	to := filepath.Join(w.dir, fmt.Sprintf("ledger-%d.db", w.stats.Kinds[string(nemHandover)]))
	if w.operator(nemHandover, false, "ledger", "backup", "--db", w.db, "--to", to, "--json") {
		w.db = to
	}
	w.startRun(nil)
}
