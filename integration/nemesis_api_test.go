package integration

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/jetledger/jetledger/admin"
)

// nemAPI is an operator action through the running run's admin API (the
// command line with --nats, the ledger file never opened), taken whatever
// the faults: Arg%5 picks a resolve, a cancel, a retry, a discard, or a
// bulk retry of every failed row (--status failed --all). With no run to
// answer (stopped, paused, mid-restart) it is refused (exit 1). Each
// action is recorded under a who of its own, and the check wants each
// row it changed recorded once in the final ledgers.
const nemAPI nemKind = "api"

func (w *nemWorld) api(arg int) {
	switch arg % 5 {
	case 0:
		w.resolve(true)
	case 1:
		w.cancel(true)
	case 2:
		w.retry(true)
	case 3:
		w.dlq(nemDiscard, true)
	default:
		w.bulkRetry()
	}
}

// operatorOn runs an operator action on the ledger at db: with --db, or
// through the API of the run that consumes into it (always refusable:
// the run may be down). An action through the API that is taken is
// counted as one row recorded under its who.
func (w *nemWorld) operatorOn(kind nemKind, api, refusable bool, db string, args ...string) bool {
	if !api {
		return w.operator(kind, refusable, append(args, "--db", db)...)
	}
	who, extra := w.apiWho(kind, db)
	code, out := w.cli(append(args, extra...)...)
	return w.apiDone(kind, who, code, out, 1)
}

// apiWho is a fresh who for an action through the API on db's run, and
// the flags that send it there.
func (w *nemWorld) apiWho(kind nemKind, db string) (string, []string) {
	durable := "jetledger"
	for _, p := range w.parts() {
		if p.db == db {
			durable = p.durable
		}
	}
	w.m.mu.Lock()
	who := fmt.Sprintf("nemesis-%s-%d", kind, len(w.m.apiActs)+1)
	w.m.apiActs[who] = [2]int{} // asked; judged by its answer
	w.m.mu.Unlock()
	return who, []string{"--nats", w.url(), "--durable", durable, "--who", who}
}

// apiDone judges an action through the API by its exit code: taken
// (rows recorded under who), refused (rows it did before some were
// skipped; none, or when no answer came perhaps one), or a finding.
func (w *nemWorld) apiDone(kind nemKind, who string, code int, out string, rows int) bool {
	switch code {
	case 0:
		w.m.mu.Lock()
		w.m.apiActs[who] = [2]int{rows, rows}
		w.m.mu.Unlock()
		return true
	case 1:
		most := rows
		if !strings.Contains(out, "skipped") && !strings.Contains(out, "code=") {
			most = max(rows, 1) // no answer: it may have been taken before the run went
		}
		w.m.mu.Lock()
		w.m.apiActs[who] = [2]int{rows, most}
		w.m.mu.Unlock()
		w.stats.Refused[string(kind)+" through the API"]++
		w.t.Logf("%s through the API refused (exit 1): %s", kind, lastLine(out))
		return false
	}
	w.m.violate("%s through the API: exit %d: %s", kind, code, lastLine(out))
	return false
}

// bulkRetry retries every failed row of one ledger through the API.
func (w *nemWorld) bulkRetry() {
	parts := w.parts()
	p := parts[w.rng.IntN(len(parts))]
	who, extra := w.apiWho("bulk", p.db)
	code, out := w.cli(append([]string{"outbox", "retry", "--status", "failed", "--all", "--json"}, extra...)...)
	var done admin.Acted
	if i := strings.Index(out, "{"); i >= 0 && (code == 0 || code == 1) {
		if err := json.NewDecoder(strings.NewReader(out[i:])).Decode(&done); err != nil && code == 0 {
			w.m.violate("bulk retry through the API: exit 0 with no answer read (%v): %s", err, lastLine(out))
			return
		}
	}
	if w.apiDone("bulk", who, code, out, len(done.Done)) {
		w.m.mu.Lock()
		for _, id := range done.Done {
			delete(w.m.resolvedAs, id)
		}
		w.m.mu.Unlock()
	}
}

// nemCheckActions wants every action taken through the API recorded in
// the final ledgers once per row it changed, and none refused recorded.
func nemCheckActions(w *nemWorld) {
	got := map[string]int{}
	w.query(func(_ string, db *sql.DB) {
		rows, err := db.Query(`SELECT who, count(*) FROM jetledger_audit WHERE who LIKE 'nemesis-%' GROUP BY who`)
		if err != nil {
			w.t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var who string
			var n int
			if err := rows.Scan(&who, &n); err != nil {
				w.t.Fatal(err)
			}
			got[who] += n
		}
	})
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	for who, want := range w.m.apiActs {
		if got[who] < want[0] || got[who] > want[1] {
			w.m.violations = append(w.m.violations, fmt.Sprintf("action %s through the API: %d records in the final ledgers, want %d to %d (one per row it changed)",
				who, got[who], want[0], want[1]))
		}
	}
}
