package service

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
)

// Attack on the stop of an owner mid-claim (consumer/outbox/dispatcher.go,
// claim; deliver): an owner sending many webhook effects (several workers,
// a slow destination, 429s flapping so rows are re-claimed constantly) is
// stopped (in process: the same as a SIGTERM for the code under test) over
// and over; its standby takes over each time, and the stopped host is
// started again as a standby, as a supervisor would. Promises: every
// message applied once, no row sent twice (items per idempotency key at a
// destination that does not honour keys), no review row from a graceful
// stop, every stop clean and bounded.

// stopAttackHost is an ownedHost with a logger the test reads.
type stopAttackHost struct {
	*ownedHost
	log *guardLog
}

// haltTimed stops the run and returns how long it took to end, and its error.
func (h *stopAttackHost) haltTimed(limit time.Duration) (time.Duration, error) {
	h.t.Helper()
	t0 := time.Now()
	h.stop()
	select {
	case err := <-h.done:
		return time.Since(t0), err
	case <-time.After(limit):
		h.t.Fatalf("%s's run did not end within %s of its stop", h.cfg.Owner.Name, limit)
	}
	return 0, nil
}

// reviewLines are h's log lines since from that put a row in review, or say a
// write-back or claim was lost.
func (h *stopAttackHost) reviewLines(from int) []string {
	s := h.log.String()
	if from > len(s) {
		from = len(s)
	}
	var out []string
	for _, l := range strings.Split(s[from:], "\n") {
		if strings.Contains(l, "consumer stopped") || strings.Contains(l, "totals") {
			continue // the run's totals (review=0)
		}
		if strings.Contains(l, "review") || strings.Contains(l, "could not be written back") || strings.Contains(l, "write-back failed") ||
			strings.Contains(l, "lease expired") || strings.Contains(l, "cancelled mid") || strings.Contains(l, "context canceled") {
			out = append(out, l)
		}
	}
	return out
}

// stopAttackRounds is 6, or JETLEDGER_STOP_ROUNDS.
func stopAttackRounds() int {
	if n, err := strconv.Atoi(os.Getenv("JETLEDGER_STOP_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return 6
}

func TestAttackStopOwnerMidSendsRounds(t *testing.T) { stopRounds(t, stopAttackRounds(), false) }

// The same with the pruner on (as the binary's --prune-interval, here short,
// and an outbox retention short enough that sent rows go as they are sent):
// its steps publish entries under the run's context, so a stop can land
// mid-publish (that it no longer fences the store is shown deterministically
// by outbox.TestAStopMidPruneKeepsTheWriteBackOfASendInFlight). Rows pruned
// are not judged; the items per key and review rows are.
func TestAttackStopOwnerMidSendsWithThePruner(t *testing.T) { stopRounds(t, stopAttackRounds(), true) }

func stopRounds(t *testing.T, rounds int, prune bool) {
	perRound := 60
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	dest := webhooktest.NewDestination(t, false) // keys not honoured: a second send is a second item
	dest.SetDelay(300 * time.Millisecond)        // sends in flight at every stop
	wh := &webhook.Config{URL: dest.URL(), Timeout: 3 * time.Second}
	a0, b0 := ownedWebhookPair(t, srv.ClientURL(), wh)
	hosts := []*stopAttackHost{{a0, &guardLog{}}, {b0, &guardLog{}}}
	for _, h := range hosts {
		h.cfg.Logger = h.log.logger()
		h.cfg.Consumer.Plan = quickPlan
		h.cfg.Outbox.Workers = 8
		if prune {
			h.cfg.Prune = Prune{Interval: 20 * time.Millisecond, Retention: time.Hour, OutboxRetention: time.Millisecond}
		}
		h.cfg.SQL.Schema, h.cfg.SQL.Apply = `CREATE TABLE IF NOT EXISTS applied (id TEXT NOT NULL)`, `INSERT INTO applied VALUES (:msg_id)`
	}

	// 429s on and off at random: rows go back to queued and are claimed again.
	flapDone, flapStop := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(flapDone)
		rng := rand.New(rand.NewPCG(1, 2))
		for on := false; ; on = !on {
			if on {
				dest.FailWith(http.StatusTooManyRequests)
			} else {
				dest.FailWith(0)
			}
			select {
			case <-flapStop:
				dest.FailWith(0)
				return
			case <-time.After(time.Duration(100+rng.IntN(400)) * time.Millisecond): // fault schedule, not synchronisation
			}
		}
	}()
	defer func() {
		select {
		case <-flapStop:
		default:
			close(flapStop)
		}
		<-flapDone
	}()

	owner, standby := hosts[0], hosts[1]
	owner.start()
	consumertest.Eventually(t, time.Minute, "a owns the partition", func() bool { return hasSnapshot(t, js) })
	standby.start()
	published := 0
	rng := rand.New(rand.NewPCG(7, 11))
	type roundFig struct {
		halt           time.Duration
		inFlight       int
		reviewRows     int
		reviewLogLines []string
	}
	var figs []roundFig
	for r := range rounds {
		marks := []int{len(hosts[0].log.String()), len(hosts[1].log.String())}
		for len(dest.Arrived()) > 0 {
			<-dest.Arrived()
		}
		publish(t, js, published, published+perRound)
		published += perRound
		// Sends under way: some arrived at the destination since the publish.
		arrived := 0
		consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("round %d: sends under way", r), func() bool {
			for {
				select {
				case <-dest.Arrived():
					arrived++
					continue
				default:
				}
				break
			}
			return arrived >= 4
		})
		// A random moment inside the flow: fault injection, not synchronisation.
		time.Sleep(time.Duration(rng.IntN(600)) * time.Millisecond)
		sending := outboxRows(t, owner.cfg.DB)["sending"]
		took, err := owner.haltTimed(2 * time.Minute)
		if err != nil {
			t.Fatalf("round %d: %s's run ended with %v (SIGTERM would exit 1)", r, owner.cfg.Owner.Name, err)
		}
		consumertest.Eventually(t, 2*time.Minute, fmt.Sprintf("round %d: %s takes over", r, standby.cfg.Owner.Name), func() bool {
			s := standby.log.String()
			return strings.Contains(s[marks[idx(hosts, standby)]:], "owning the partition")
		})
		owner.start() // the supervisor restarts the stopped host: it stands by
		owner, standby = standby, owner
		consumertest.Eventually(t, 3*time.Minute, fmt.Sprintf("round %d: the new owner commits %d, the restarted standby's copy too", r, published), func() bool {
			return processed(t, owner.cfg.DB) == published && processed(t, standby.cfg.DB) == published
		})
		var lines []string
		for i, h := range hosts {
			lines = append(lines, h.reviewLines(marks[i])...)
		}
		fig := roundFig{halt: took, inFlight: sending, reviewRows: outboxRows(t, owner.cfg.DB)["review"], reviewLogLines: lines}
		figs = append(figs, fig)
		t.Logf("round %d: stopped %s after %d arrivals (%d rows sending in its file) in %s; review rows in the new owner's file: %d; review/lost lines: %d",
			r, standby.cfg.Owner.Name, arrived, sending, took.Round(time.Millisecond), fig.reviewRows, len(lines))
		for _, l := range lines {
			t.Logf("  %s", l)
		}
	}
	close(flapStop)
	<-flapDone
	dest.SetDelay(0)
	consumertest.Eventually(t, 3*time.Minute, "the last owner settles every row (sent or review)", func() bool {
		rs := outboxRows(t, owner.cfg.DB)
		return processed(t, owner.cfg.DB) == published && rs["queued"] == 0 && rs["sending"] == 0 && (prune || rs["sent"]+rs["review"] == published)
	})
	consumertest.Eventually(t, 2*time.Minute, "the standby's copy holds the settled rows", func() bool {
		a, b := outboxRows(t, owner.cfg.DB), outboxRows(t, standby.cfg.DB)
		return a["sent"] == b["sent"] && a["review"] == b["review"]
	})
	for _, h := range []*stopAttackHost{standby, owner} {
		took, err := h.haltTimed(2 * time.Minute)
		if err != nil {
			t.Fatalf("final stop of %s: %v", h.cfg.Owner.Name, err)
		}
		t.Logf("final stop of %s: %s", h.cfg.Owner.Name, took.Round(time.Millisecond))
	}

	// Judge the last owner's file: messages applied once, rows against items.
	file := owner.cfg.DB
	if n := count(t, file, `SELECT count(*) FROM applied`); n != published {
		t.Errorf("applied holds %d rows for %d messages", n, published)
	}
	if n := count(t, file, `SELECT count(DISTINCT id) FROM applied`); n != published {
		t.Errorf("applied holds %d distinct messages of %d", n, published)
	}
	perKey := map[string]int{}
	for _, it := range dest.Items() {
		perKey[it.Key]++
	}
	rows := ops2Rows(t, file)
	twice, review, sentMissing, itemNoRow := []string{}, []string{}, []string{}, []string{}
	for k, n := range perKey {
		if n > 1 {
			twice = append(twice, fmt.Sprintf("%s×%d(%s)", k, n, rows[k].Status))
		}
		if _, ok := rows[k]; !ok && !prune {
			itemNoRow = append(itemNoRow, k)
		}
	}
	for id, r := range rows {
		switch r.Status {
		case "review":
			review = append(review, fmt.Sprintf("%s(items %d, posts %d)", id, perKey[id], dest.Requests(id)))
		case "sent":
			if perKey[id] != 1 {
				sentMissing = append(sentMissing, fmt.Sprintf("%s(items %d)", id, perKey[id]))
			}
		}
	}
	totalReviewLines := 0
	var maxHalt time.Duration
	for _, f := range figs {
		totalReviewLines += len(f.reviewLogLines)
		maxHalt = max(maxHalt, f.halt)
	}
	t.Logf("totals: %d rounds, %d messages, %d items at the destination (%d keys), %d rows (%v), review rows %d, review/lost log lines %d, longest stop %s",
		rounds, published, len(dest.Items()), len(perKey), len(rows), outboxRows(t, file), len(review), totalReviewLines, maxHalt.Round(time.Millisecond))
	if len(twice) > 0 {
		t.Errorf("rows sent twice (items per key): %v", twice)
	}
	if len(sentMissing) > 0 {
		t.Errorf("rows 'sent' without exactly one item: %v", sentMissing)
	}
	if len(itemNoRow) > 0 {
		t.Errorf("items with no row: %v", itemNoRow)
	}
	if len(review) > 0 {
		t.Errorf("graceful stops left %d rows in review: %v", len(review), review)
	}
	if bound := 3*time.Second + owner.cfg.Consumer.Plan.ClaimLease(3*time.Second); maxHalt > bound+5*time.Second {
		t.Errorf("a stop took %s, over the sink timeout + claim lease %s (+5s for a loaded host)", maxHalt, bound)
	}
}

func idx(hosts []*stopAttackHost, h *stopAttackHost) int {
	for i, x := range hosts {
		if x == h {
			return i
		}
	}
	return -1
}
