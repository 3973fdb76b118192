package service

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// Attacks (second round) on the stop of an owner whose writes go on beyond
// the stop (ledger/changelog.go, write: beginBeyondStop) and whose
// dispatcher completes a begun claim (consumer/outbox/dispatcher.go,
// claim), combined with operations on the cluster at the moment of the
// stop: the changelog stream deleted, the lease bucket deleted, the host
// replaced with an empty disk. Promises judged: the run stops cleanly
// (exit 0) and within the sink timeout + claim lease; every message is
// applied once; no row is sent twice (the destination does not honour
// keys); a row 'sent' has exactly one item; a row in review has a cause
// the operation explains (and none at all where nothing was lost).

// stop2Env is an owner a and a standby b sending webhook effects to a slow
// destination with 8 workers.
type stop2Env struct {
	t         *testing.T
	js        jetstream.JetStream
	srvURL    string
	dest      *webhooktest.Destination
	wh        *webhook.Config
	a, b      *stopAttackHost
	published int
}

func newStop2Env(t *testing.T) *stop2Env {
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	dest := webhooktest.NewDestination(t, false) // keys not honoured: a second send is a second item
	dest.SetDelay(300 * time.Millisecond)        // sends in flight at the stop
	wh := &webhook.Config{URL: dest.URL(), Timeout: 3 * time.Second}
	a0, b0 := ownedWebhookPair(t, srv.ClientURL(), wh)
	e := &stop2Env{t: t, js: js, srvURL: srv.ClientURL(), dest: dest, wh: wh, a: &stopAttackHost{a0, &guardLog{}}, b: &stopAttackHost{b0, &guardLog{}}}
	for _, h := range []*stopAttackHost{e.a, e.b} {
		stop2Configure(h)
	}
	return e
}

func stop2Configure(h *stopAttackHost) {
	h.cfg.Logger = h.log.logger()
	h.cfg.Consumer.Plan = quickPlan
	h.cfg.Outbox.Workers = 8
	h.cfg.SQL.Schema, h.cfg.SQL.Apply = `CREATE TABLE IF NOT EXISTS applied (id TEXT NOT NULL)`, `INSERT INTO applied VALUES (:msg_id)`
}

// startPair starts a, waits for its snapshot, starts b.
func (e *stop2Env) startPair() {
	e.a.start()
	consumertest.Eventually(e.t, time.Minute, "a owns the partition", func() bool { return hasSnapshot(e.t, e.js) })
	e.b.start()
}

// midSends publishes n more messages and waits until sends are under way
// (some arrived at the destination).
func (e *stop2Env) midSends(n int) {
	for len(e.dest.Arrived()) > 0 {
		<-e.dest.Arrived()
	}
	publish(e.t, e.js, e.published, e.published+n)
	e.published += n
	arrived := 0
	consumertest.Eventually(e.t, 2*time.Minute, "sends under way", func() bool {
		for {
			select {
			case <-e.dest.Arrived():
				arrived++
				continue
			default:
			}
			return arrived >= 4
		}
	})
}

// stopWith stops h while fault runs, at once, and wants a clean, bounded stop.
func (e *stop2Env) stopWith(h *stopAttackHost, fault func()) time.Duration {
	e.t.Helper()
	var wg sync.WaitGroup
	wg.Go(fault)
	took, err := h.haltTimed(2 * time.Minute)
	wg.Wait()
	if err != nil {
		e.t.Errorf("%s's run ended with %v (SIGTERM would exit 1)", h.cfg.Owner.Name, err)
	}
	if bound := 3*time.Second + h.cfg.Consumer.Plan.ClaimLease(3*time.Second) + 5*time.Second; took > bound {
		e.t.Errorf("the stop took %s, over the sink timeout + claim lease (+5s) %s", took, bound)
	}
	return took
}

// settled waits until every message is committed in both hosts' files and
// no row is queued or sending. A host whose copy waits for a person, as it
// must when the log was deleted and the other host began the new one from
// fewer entries than its copy holds (docs/scaling.md), is left out: it
// owns nothing and consumes nothing until then. That was this file's
// unexplained failure: the standby, an entry behind, began the new log
// (its rows went to review, as they must), and the old owner waited.
func (e *stop2Env) settled(hosts ...*stopAttackHost) {
	e.t.Helper()
	e.dest.SetDelay(0)
	defer func() {
		if e.t.Failed() { // what each host had, and said, when it did not settle
			for _, h := range hosts {
				e.t.Logf("%s: %d processed, rows %v; its log's end:\n%s", h.cfg.Owner.Name, processed(e.t, h.cfg.DB), outboxRows(e.t, h.cfg.DB), tail(h.log.String(), 6000))
			}
		}
	}()
	consumertest.Eventually(e.t, 3*time.Minute, fmt.Sprintf("every host's file holds %d, no row queued or sending", e.published), func() bool {
		owners := 0
		for _, h := range hosts {
			if keptForAPerson(h) {
				continue
			}
			owners++
			rs := outboxRows(e.t, h.cfg.DB)
			if processed(e.t, h.cfg.DB) != e.published || rs["queued"] != 0 || rs["sending"] != 0 {
				return false
			}
		}
		return owners > 0
	})
}

// keptForAPerson says whether h waits for a person, its file holding
// entries of the earlier log that the one begun again from another host's
// copy lacks (the lifecycle's "begun from less").
func keptForAPerson(h *stopAttackHost) bool {
	return strings.Contains(h.log.String(), "the new one begun from less")
}

// stop2Review lists the review rows of file with their reason.
func stop2Review(t *testing.T, file string) []string {
	db, err := sql.Open("sqlite", "file:"+filepath.ToSlash(file)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT id, coalesce(error, '') FROM outbox WHERE status = 'review'`)
	if err != nil {
		return nil
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, why string
		if rows.Scan(&id, &why) == nil {
			out = append(out, id+": "+why)
		}
	}
	return out
}

// stop2Causes counts review rows by cause: a write-back lost with the log
// (the claim's lease expired mid-send), or a queued row of a log begun
// again (maybe sent).
func stop2Causes(review []string) map[string]int {
	out := map[string]int{}
	for _, r := range review {
		switch {
		case strings.Contains(r, "expired mid-send"):
			out["lease expired mid-send"]++
		case strings.Contains(r, "log began again"):
			out["queued, maybe sent: log began again"]++
		default:
			out["other"]++
		}
	}
	return out
}

// judge checks file: messages once, rows against items; it returns the
// review rows (with reasons) for the caller to judge.
func (e *stop2Env) judge(file string) (review []string) {
	t := e.t
	t.Helper()
	if n := count(t, file, `SELECT count(*) FROM applied`); n != e.published {
		t.Errorf("%s: applied holds %d rows for %d messages", file, n, e.published)
	}
	if n := count(t, file, `SELECT count(DISTINCT id) FROM applied`); n != e.published {
		t.Errorf("%s: applied holds %d distinct messages of %d", file, n, e.published)
	}
	perKey := map[string]int{}
	for _, it := range e.dest.Items() {
		perKey[it.Key]++
	}
	rows := ops2Rows(t, file)
	var twice, sentBad, noRow []string
	for k, n := range perKey {
		if n > 1 {
			twice = append(twice, fmt.Sprintf("%s×%d(%s)", k, n, rows[k].Status))
		}
		if _, ok := rows[k]; !ok {
			noRow = append(noRow, k)
		}
	}
	for id, r := range rows {
		if r.Status == "sent" && perKey[id] != 1 {
			sentBad = append(sentBad, fmt.Sprintf("%s(items %d)", id, perKey[id]))
		}
	}
	if len(twice) > 0 {
		t.Errorf("%s: rows sent twice (items per key): %v", file, twice)
	}
	if len(sentBad) > 0 {
		t.Errorf("%s: rows 'sent' without exactly one item: %v", file, sentBad)
	}
	if len(noRow) > 0 {
		t.Errorf("%s: items with no row: %v", file, noRow)
	}
	review = stop2Review(t, file)
	t.Logf("%s: %d messages, %d items (%d keys), rows %v, review %d", file, e.published, len(e.dest.Items()), len(perKey), outboxRows(t, file), len(review))
	return review
}

// Attack 1a: the owner is stopped mid-sends (8 workers, a slow
// destination) while its changelog stream is deleted. The batch in hand
// and the write-backs of the sends in flight are refused by the log
// (gone): the run must still exit 0 and within its bound; once both hosts
// are started again (the supervisor), every message is applied once and
// nothing is sent twice. Review rows are allowed only with a cause the
// deletion explains (a write-back lost with the log, or queued rows of a
// log begun again).
func TestAttack2StopMidSendsWhileTheLogIsDeleted(t *testing.T) {
	t.Parallel()
	e := newStop2Env(t)
	e.startPair()
	e.midSends(60)
	took := e.stopWith(e.a, func() { deleteLog(t, e.js) })
	t.Logf("a stopped in %s with its log deleted", took)
	e.restartAfterDeletion()
}

// restartAfterDeletion starts a again (the supervisor: it stands by, or
// begins the new log), sends 20 more, and checks each review row has a
// cause the deletion explains.
func (e *stop2Env) restartAfterDeletion() {
	t := e.t
	e.a.start()
	explained := func(r string) bool {
		return strings.Contains(r, "log began again") || strings.Contains(r, "expired mid-send") || strings.Contains(r, "maybe sent")
	}
	for _, r := range e.sendMoreAndJudge(explained) {
		for _, row := range r.review {
			t.Errorf("%s: a review row without a cause the deletion explains: %s", r.host, row)
		}
	}
}

// judged are a host's review rows that its test's operation does not
// explain.
type judged struct {
	host   string
	review []string
}

// sendMoreAndJudge sends 20 more messages, lets both hosts settle, stops
// them, and returns each host's review rows that explained does not
// accept (nil: none is), logging every host's rows by cause.
func (e *stop2Env) sendMoreAndJudge(explained func(string) bool) []judged {
	e.midSends(20)
	e.settled(e.a, e.b)
	e.b.haltTimed(2 * time.Minute)
	e.a.haltTimed(2 * time.Minute)
	var out []judged
	for _, h := range []*stopAttackHost{e.a, e.b} {
		if keptForAPerson(h) {
			// Its file holds entries the log begun again lacks: kept as
			// it was for a person (settled skips it too), not judged;
			// only a deleted log (explained given) begins again.
			if explained == nil {
				e.t.Errorf("%s waits for a person after an operation that deleted no log", h.cfg.Owner.Name)
			}
			e.t.Logf("%s: waits for a person, its file kept: %v", h.cfg.Owner.Name, outboxRows(e.t, h.cfg.DB))
			continue
		}
		review := e.judge(h.cfg.DB)
		e.t.Logf("%s: review rows by cause: %v", h.cfg.Owner.Name, stop2Causes(review))
		var left []string
		for _, r := range review {
			if explained == nil || !explained(r) {
				left = append(left, r)
			}
		}
		if len(left) > 0 {
			out = append(out, judged{h.cfg.Owner.Name, left})
		}
	}
	return out
}

// Attack 1b: the owner is stopped mid-sends while the lease bucket is
// deleted. Nothing is lost with the bucket: the owner's key is taken back
// at its next renewal and let go as it stops, so the stop must be as clean
// as without the deletion: exit 0, bounded, no row in review, nothing sent
// twice, and the standby owns the partition afterwards.
func TestAttack2StopMidSendsWhileTheLeaseBucketIsDeleted(t *testing.T) {
	t.Parallel()
	e := newStop2Env(t)
	e.startPair()
	e.midSends(60)
	took := e.stopWith(e.a, func() {
		if err := e.js.DeleteKeyValue(t.Context(), changelog.LeaseBucket); err != nil {
			t.Errorf("delete the lease bucket: %v", err)
		}
	})
	t.Logf("a stopped in %s with the lease bucket deleted", took)
	consumertest.Eventually(t, 2*time.Minute, "b takes over", func() bool { return strings.Contains(e.b.log.String(), "owning the partition") })
	e.a.start()
	for _, r := range e.sendMoreAndJudge(nil) {
		t.Errorf("%s: a graceful stop with the lease bucket deleted left %d rows in review: %v", r.host, len(r.review), r.review)
	}
}

// Attack 1c: both at once: the changelog stream and the lease bucket
// deleted as the owner stops mid-sends.
func TestAttack2StopMidSendsWhileLogAndLeaseBucketAreDeleted(t *testing.T) {
	t.Parallel()
	e := newStop2Env(t)
	e.startPair()
	e.midSends(60)
	took := e.stopWith(e.a, func() {
		deleteLog(t, e.js)
		if err := e.js.DeleteKeyValue(t.Context(), changelog.LeaseBucket); err != nil {
			t.Errorf("delete the lease bucket: %v", err)
		}
	})
	t.Logf("a stopped in %s with the log and the lease bucket deleted", took)
	e.restartAfterDeletion()
}

// Attack 2: the owner (no standby running) is stopped mid-sends, then its
// host is replaced with an empty disk (the ledger file and its -wal gone).
// The replacement restores the snapshot and applies the log: every
// message once, nothing sent twice, and, the stop being graceful (every
// claim and write-back in the log), no row in review.
func TestAttack2ReplacedAfterAStopMidSends(t *testing.T) {
	t.Parallel()
	e := newStop2Env(t)
	e.a.start()
	consumertest.Eventually(t, time.Minute, "a owns the partition", func() bool { return hasSnapshot(t, e.js) })
	e.midSends(60)
	e.stopWith(e.a, func() {})
	atStop := outboxRows(t, e.a.cfg.DB)
	// The host is replaced: an empty disk under the same name.
	files, _ := filepath.Glob(e.a.cfg.DB + "*")
	for _, f := range files {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	e.a.log = &guardLog{}
	stop2Configure(e.a)
	e.a.start()
	consumertest.Eventually(t, 2*time.Minute, "the replacement owns the partition", func() bool {
		return strings.Contains(e.a.log.String(), "owning the partition")
	})
	e.b.start() // a standby after it, from the replacement's snapshot
	left := e.sendMoreAndJudge(nil)
	t.Logf("rows in a's file at the stop: %v", atStop)
	for _, r := range left {
		t.Errorf("%s: the replacement after a graceful stop holds %d rows in review: %v", r.host, len(r.review), r.review)
	}
}

// Attack 3: two runs of the partition started at once (both --standby),
// the one that owns it stopped mid-sends as soon as sends are under way:
// the other takes over; every message once, nothing sent twice, no row in
// review.
func TestAttack2TwoStartedAtOnceOwnerStoppedMidSends(t *testing.T) {
	t.Parallel()
	e := newStop2Env(t)
	e.a.start()
	e.b.start()
	consumertest.Eventually(t, time.Minute, "one owns the partition", func() bool { return hasSnapshot(t, e.js) })
	e.midSends(60)
	owner, standby := e.a, e.b
	consumertest.Eventually(t, time.Minute, "an owner says so", func() bool {
		return strings.Contains(e.a.log.String(), "owning the partition") || strings.Contains(e.b.log.String(), "owning the partition")
	})
	if strings.Contains(e.b.log.String(), "owning the partition") {
		owner, standby = e.b, e.a
	}
	if strings.Contains(standby.log.String(), "owning the partition") {
		t.Errorf("both runs said they own the partition")
	}
	mark := len(standby.log.String())
	e.stopWith(owner, func() {})
	consumertest.Eventually(t, 2*time.Minute, "the other takes over", func() bool {
		return strings.Contains(standby.log.String()[mark:], "owning the partition")
	})
	owner.start()
	for _, r := range e.sendMoreAndJudge(nil) {
		t.Errorf("%s: %d rows in review after a graceful stop: %v", r.host, len(r.review), r.review)
	}
}

// Attack 4 (through a person): a person's cancel of a sent row is in
// flight on the owner (its delete at the destination held) when the owner
// is stopped. The run's stop waits for the admin API's requests in hand
// (admin.Server.Stop; micro's own Stop drains without waiting), so the
// action is written and answered before the store closes and the lease
// passes. Promises: the person is answered; the stop is clean and held
// only within the sink's timeout; the row is never left 'sent' with nothing at the destination
// (the cancel is pending in review, settled by the new owner's lookup, or
// cancelled); nothing else changes.
func TestAttack2StopWhileAPersonsCancelIsInFlight(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	nc, js := consumertest.Connect(t, srv)
	dest := webhooktest.NewDestination(t, false)
	proxy := newOps2Proxy(t, dest)
	a0, b0 := ownedWebhookPair(t, srv.ClientURL(), proxy.cfg())
	a, b := &stopAttackHost{a0, &guardLog{}}, &stopAttackHost{b0, &guardLog{}}
	for _, h := range []*stopAttackHost{a, b} {
		stop2Configure(h)
	}
	a.start()
	consumertest.Eventually(t, time.Minute, "a owns the partition", func() bool { return hasSnapshot(t, js) })
	b.start()
	publish(t, js, 0, 3)
	consumertest.Eventually(t, time.Minute, "b's copy holds 3 sent", func() bool { return outboxRows(t, b.cfg.DB)["sent"] == 3 })
	b.haltTimed(time.Minute) // its admin API would answer the action (refused, as a standby's)

	addr := admin.Address{Stream: "S", Durable: "d"}
	var dry admin.Acted
	if err := call(nc, addr, "outbox.cancel", admin.Act{Who: "ops", Status: ledger.StatusSent, DryRun: true}, &dry); err != nil || dry.Matched != 3 {
		t.Fatalf("dry run: %v %+v", err, dry)
	}
	proxy.holdDeletes()
	acted := make(chan error, 1)
	var done admin.Acted
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		acted <- admin.Call(ctx, nc, addr, "outbox.cancel", admin.Act{Who: "ops", IDs: dry.IDs[:1], Seen: dry.Seen}, &done)
	}()
	select {
	case <-proxy.deletesSeen:
	case <-time.After(time.Minute):
		t.Fatal("the cancel's delete did not reach the destination")
	}
	b.start()
	consumertest.Eventually(t, time.Minute, "b follows a", func() bool {
		return strings.Contains(b.log.String(), "following") || outboxRows(t, b.cfg.DB)["review"] == 1
	})
	took, err := a.haltTimed(time.Minute)
	if err != nil {
		t.Errorf("a's run: %v", err)
	}
	t.Logf("a stopped in %s with the person's cancel in flight", took)
	consumertest.Eventually(t, time.Minute, "b takes over", func() bool { return strings.Contains(b.log.String(), "owning the partition") })
	proxy.release() // the delete lands; the action writes on a's store, closed, its lease gone
	var callErr error
	select {
	case callErr = <-acted:
	case <-time.After(2 * time.Minute):
		t.Fatal("the person's action never answered")
	}
	t.Logf("the person was told: %v %+v", callErr, done)
	if callErr != nil {
		// The run's stop waits for the admin API's requests in hand
		// (admin.Server.Stop, StopWait at the most), so the action is
		// written and answered while the run still owns the ledger.
		t.Errorf("the person's cancel, in flight at the stop, was not answered (%v), though it deleted the item at the destination", callErr)
	}
	id := dry.IDs[0]
	consumertest.Eventually(t, 3*time.Minute, "the cancelled row settles in b's file (not 'sent')", func() bool {
		r := ops2Rows(t, b.cfg.DB)[id]
		return r.Status == "cancelled" && !r.Pending
	})
	if bad := sentWithNothing(t, b.cfg.DB, dest); len(bad) > 0 {
		t.Errorf("rows 'sent' with nothing at the destination: %v", bad)
	}
	if n := len(dest.Items()); n != 2 {
		t.Errorf("destination holds %d items, want 2", n)
	}
	if callErr == nil && len(done.Done) == 1 {
		t.Logf("the person was told it was done")
	}
	b.haltTimed(time.Minute)
	t.Logf("b's rows: %v; a's rows: %v", outboxRows(t, b.cfg.DB), outboxRows(t, a.cfg.DB))
	for _, l := range strings.Split(a.log.String(), "\n") {
		if strings.Contains(l, "admin") || strings.Contains(l, "cancel") {
			t.Logf("a said: %s", l)
		}
	}
}

// Attack 1d: the owner is stopped mid-sends while its changelog stream is
// purged (every entry gone, its last sequence kept). The standby, whose
// snapshot lacks the purged entries, must not take over from it; the
// stopped host, restarted by its supervisor, owns again (its file holds
// the log through its last entry), stores a snapshot, and the standby
// restores it. Nothing applied twice or sent twice; no row in review.
func TestAttack2StopMidSendsWhileTheLogIsPurged(t *testing.T) {
	t.Parallel()
	e := newStop2Env(t)
	e.startPair()
	e.midSends(60)
	name, _ := changelog.Names("S", "d")
	took := e.stopWith(e.a, func() {
		s, err := e.js.Stream(t.Context(), name)
		if err == nil {
			err = s.Purge(t.Context())
		}
		if err != nil {
			t.Errorf("purge the log: %v", err)
		}
	})
	t.Logf("a stopped in %s with its log purged", took)
	e.a.start()
	for _, r := range e.sendMoreAndJudge(nil) {
		t.Errorf("%s: %d rows in review after a graceful stop with the log purged: %v", r.host, len(r.review), r.review)
	}
}

// Attack 2b: as Attack 2, with snapshots every 200 ms (the log trimmed
// behind each) and the pruner on, so a snapshot, a trim or a prune step
// may be under way at the stop; then the host is replaced with an empty
// disk and no standby ran meanwhile.
func TestAttack2ReplacedAfterAStopMidSendsSnapshotting(t *testing.T) {
	t.Parallel()
	e := newStop2Env(t)
	for _, h := range []*stopAttackHost{e.a, e.b} {
		h.cfg.Owner.SnapshotInterval = 200 * time.Millisecond
		h.cfg.Prune = Prune{Interval: 20 * time.Millisecond, Retention: time.Hour, OutboxRetention: time.Hour}
	}
	e.a.start()
	consumertest.Eventually(t, time.Minute, "a owns the partition", func() bool { return hasSnapshot(t, e.js) })
	e.midSends(60)
	e.stopWith(e.a, func() {})
	files, _ := filepath.Glob(e.a.cfg.DB + "*")
	for _, f := range files {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	stopped := e.a.log // what the stopped run said, for a failure below
	e.a.log = &guardLog{}
	stop2Configure(e.a)
	e.a.start()
	consumertest.Eventually(t, 2*time.Minute, "the replacement owns the partition", func() bool {
		return strings.Contains(e.a.log.String(), "owning the partition")
	})
	e.b.start()
	left := e.sendMoreAndJudge(nil)
	for _, r := range left {
		t.Errorf("%s: the replacement after a graceful stop holds %d rows in review: %v", r.host, len(r.review), r.review)
	}
	if len(left) > 0 { // seen once in CI under load, not since: what the stopped run said of its stop
		for _, l := range strings.Split(stopped.String(), "\n") {
			if strings.Contains(l, "WARN") || strings.Contains(l, "ERROR") || strings.Contains(l, "stop") || strings.Contains(l, "fenc") {
				t.Logf("the stopped run said: %s", l)
			}
		}
	}
}
