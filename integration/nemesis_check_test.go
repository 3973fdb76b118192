package integration

import (
	"database/sql"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
	"github.com/jetledger/jetledger/publisher"
)

// nemModel is what the schedule did, as the checker judges it: every id it
// published and each copy the stream acked, what it meant to be a conflict
// or a dead letter, and what operator actions took away on purpose (a purge,
// a discard, a resolve as failed, a cancel, a legitimate prune). The
// checker's expectation follows it, so "the schedule asked for this" and
// "the product lost it" are told apart.
type nemModel struct {
	mu         sync.Mutex
	evs        map[string]event    // good ids: their first payload
	order      []string            // good ids, in publish order
	acked      map[string]bool     // the stream acked a copy
	uncertain  map[string]bool     // a publish gave up: stored or not
	copies     map[string][]uint64 // stream sequences of every acked copy (conflicts and bad ones too)
	conflicts  map[string][]uint64 // id → sequences of its conflicting copies
	bad        map[string]bool     // ids whose payload --apply cannot read
	noID       []uint64            // sequences of messages without Nats-Msg-Id
	discarded  map[string]bool     // dead letters discarded, by id
	discSeq    map[uint64]bool     // and by sequence
	gone       map[string]bool     // ids a purge may have taken before they were handled
	goneSeq    map[uint64]bool     // copies a purge may have taken before they were handled
	epochs     map[string]int      // applications ended by a legitimate prune of the row
	ackEpoch   map[string]int      // epochs when the id's last new copy was acked
	resolvedAs map[string]string   // outbox row → "sent"/"failed" by an operator
	cancelled  map[string]bool     // outbox rows an operator cancelled
	apiActs    map[string][2]int   // actions through the API, by who: the fewest and most rows each changed
	violations []string
}

func newNemModel() *nemModel {
	return &nemModel{evs: map[string]event{}, acked: map[string]bool{}, uncertain: map[string]bool{}, copies: map[string][]uint64{},
		conflicts: map[string][]uint64{}, bad: map[string]bool{}, discarded: map[string]bool{}, discSeq: map[uint64]bool{},
		gone: map[string]bool{}, goneSeq: map[uint64]bool{}, epochs: map[string]int{}, ackEpoch: map[string]int{}, resolvedAs: map[string]string{},
		cancelled: map[string]bool{}, apiActs: map[string][2]int{}}
}

func (m *nemModel) violate(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.violations = append(m.violations, fmt.Sprintf(format, args...))
}

func (m *nemModel) fresh(e event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.evs[e.ID] = e
	m.order = append(m.order, e.ID)
}

func (m *nemModel) ack(id string, ack publisher.Ack) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ackedLocked(id, ack)
}

func (m *nemModel) ackedLocked(id string, ack publisher.Ack) {
	m.acked[id] = true
	if !ack.Duplicate {
		m.copies[id] = append(m.copies[id], ack.Sequence)
		// A new copy must be applied (or be a duplicate of a row there):
		// an earlier purge or delete no longer excuses the id, and a
		// prune before it does not either.
		delete(m.gone, id)
		m.ackEpoch[id] = m.epochs[id]
	}
}

func (m *nemModel) unsure(e event, data []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.uncertainLocked(e, data)
}

func (m *nemModel) uncertainLocked(e event, _ []byte) { m.uncertain[e.ID] = true }

// nemCheck is the one checker, run after the drain: it generalises
// checkSoak to what a schedule may have done on purpose.
func nemCheck(w *nemWorld) {
	if f := nemTopologies[w.topo].check; f != nil {
		f(w)
	}
	nemCheckActions(w)
	m := w.m
	var (
		applied                  map[string]bool
		deadIDs                  map[string]bool
		deadSeqs, conflictSeqs   map[uint64]bool
		balances                 = map[string]int{}
		rows                     []outboxRow
		review                   int
		byKey                    = map[string][]webhooktest.StoredItem{}
		perMessage               = map[string]int{}
		withConflictAfterPruning = map[string]bool{}
	)
	snap := w.snapshot()
	applied, deadIDs, deadSeqs, conflictSeqs = snap.applied, snap.deadIDs, snap.deadSeqs, snap.conflicts
	w.query(func(_ string, db *sql.DB) {
		r, err := db.Query(`SELECT account, amount FROM balances`)
		if err != nil {
			w.t.Fatal(err)
		}
		for r.Next() {
			var a string
			var n int
			if err := r.Scan(&a, &n); err != nil {
				w.t.Fatal(err)
			}
			balances[a] += n
		}
		r.Close()
		rows = append(rows, outboxRows(w.t, db)...)
	})
	for _, it := range w.items() {
		byKey[it.Key] = append(byKey[it.Key], it)
		perMessage[it.MessageID]++
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	violate := func(format string, args ...any) { m.violations = append(m.violations, fmt.Sprintf(format, args...)) }

	// Every acknowledged publish applied exactly once, or legitimately gone.
	want := map[string]int{}
	for _, id := range m.order {
		e := m.evs[id]
		n := m.epochs[id]
		if applied[id] {
			n++
		}
		switch {
		case applied[id]:
			w.stats.Applied++
		case m.gone[id]:
			w.stats.Gone++
		case deadIDs[id]:
			violate("dead-lettered: %s is a good payload, dead-lettered", id)
		case m.acked[id] && m.ackEpoch[id] == m.epochs[id]:
			// No prune since its last copy was acked: it must be applied.
			violate("lost: %s was acked by the stream (seqs %v) and never applied", id, m.copies[id])
		}
		if m.epochs[id] > 0 && slices.ContainsFunc(m.conflicts[id], func(s uint64) bool { return !conflictSeqs[s] }) {
			// A conflicting copy not recorded as one, after a prune
			// removed the row: that copy may have been a new message with
			// the other payload; the account is not judged.
			withConflictAfterPruning[e.Account] = true
		}
		want[e.Account] += n * e.Amount
	}
	// Balances equal the sum of applied events: nothing applied twice.
	accounts := map[string]bool{}
	for a := range want {
		accounts[a] = true
	}
	for a := range balances {
		accounts[a] = true
	}
	for _, a := range sortedKeys(accounts) {
		if withConflictAfterPruning[a] {
			continue
		}
		if balances[a] != want[a] {
			violate("applied twice or lost: account %s balance %d, the applied events sum to %d", a, balances[a], want[a])
		}
	}
	// Conflicts recorded, never applied (the balance shows the latter).
	for id, seqs := range m.conflicts {
		for _, s := range seqs {
			w.stats.Conflicts++
			if !conflictSeqs[s] && !m.goneSeq[s] && m.epochs[id] == 0 {
				violate("conflict not recorded: %s at seq %d has another payload", id, s)
			}
		}
	}
	// Dead letters the schedule caused on purpose.
	for id := range m.bad {
		if applied[id] {
			violate("applied a payload --apply cannot read: %s", id)
		}
		if m.acked[id] && !deadIDs[id] && !m.discarded[id] && !m.gone[id] {
			violate("a payload --apply cannot read, %s, was neither applied nor dead-lettered", id)
		}
	}
	for _, s := range m.noID {
		if !deadSeqs[s] && !m.discSeq[s] && !m.goneSeq[s] {
			violate("a message without Nats-Msg-Id at seq %d was not dead-lettered", s)
		}
	}
	w.stats.DeadLet += len(deadSeqs)

	// Effects: none twice, every applied message's at the destination,
	// queued or in review with a reason; nothing sending.
	rowsOf := map[string][]outboxRow{}
	for _, r := range rows {
		rowsOf[r.MessageID] = append(rowsOf[r.MessageID], r)
		items := byKey[r.ID]
		switch {
		case len(items) > 1:
			violate("sent twice: outbox row %s (message %s) has %d items at the destination", r.ID, r.MessageID, len(items))
		case r.Status == "sending" || r.Status == "queued":
			violate("outbox row %s (message %s) still %s after the drain", r.ID, r.MessageID, r.Status)
		case r.Status == "sent" && (len(items) != 1 || items[0].ExternalID != r.ExternalID):
			violate("outbox row %s is sent as %q but the destination holds %+v", r.ID, r.ExternalID, items)
		case r.Status == "failed" && len(items) > 0:
			violate("outbox row %s is failed but its item %s is at the destination", r.ID, items[0].ExternalID)
		case r.Status == "cancelled" && len(items) > 0:
			violate("outbox row %s is cancelled but its item %s is still at the destination", r.ID, items[0].ExternalID)
		case r.Status == "review":
			review++
			if r.Error == "" {
				violate("outbox row %s is in review without a reason", r.ID)
			}
		}
	}
	w.stats.Review += review
	for _, id := range sortedKeys(applied) {
		if !m.acked[id] && !m.uncertain[id] {
			if _, ok := m.evs[id]; !ok {
				violate("applied %s, which the schedule never published", id)
			}
		}
		if perMessage[id] > m.epochs[id]+1 {
			violate("sent twice: message %s has %d items at the destination, applied %d times", id, perMessage[id], m.epochs[id]+1)
		}
		if perMessage[id] > 0 {
			continue
		}
		accounted := false
		for _, r := range rowsOf[id] {
			if r.Status == "review" || r.Status == "queued" || m.cancelled[r.ID] || m.resolvedAs[r.ID] == "failed" {
				accounted = true
			}
		}
		if !accounted {
			st := []string{}
			for _, r := range rowsOf[id] {
				st = append(st, r.Status)
			}
			violate("effect lost: message %s was applied, but its effect is not at the destination, queued or in review (rows %v)", id, st)
		}
	}
	for id, n := range perMessage {
		if !applied[id] && m.epochs[id] == 0 && n > 0 {
			violate("sent for a message never applied: %s", id)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
