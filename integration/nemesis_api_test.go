package integration

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/internal/adminctl"
	"github.com/nats-io/nats.go"
)

// nemAPI is an operator action through the running run's admin API (the
// command line with --nats, the ledger file never opened), taken whatever
// the faults: Arg%6 picks a resolve, a cancel, a retry, a discard, a
// bulk retry of every failed row (--status failed --all), or a requeue
// (the API's dlq.requeue: no command takes it through the API). With no run to
// answer (stopped, paused, mid-restart) it is refused (exit 1). Each
// action is recorded under a who of its own, and the check wants each
// row it changed recorded once in the final ledgers.
const nemAPI nemKind = "api"

func (w *nemWorld) api(arg int) {
	switch arg % 6 {
	case 5:
		w.apiRequeue()
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
		// Refused: none of its rows, or (a bulk) those its answer says it
		// did before some were skipped; no answer: perhaps its rows, taken
		// before the run went.
		fewest, most := 0, 0
		if kind == "bulk" {
			fewest, most = rows, rows
		}
		switch {
		case strings.Contains(out, "skipped") || strings.Contains(out, "code="):
		case kind == "bulk":
			most = math.MaxInt // no answer: any of its rows
		default:
			most = 1
		}
		w.m.mu.Lock()
		w.m.apiActs[who] = [2]int{fewest, most}
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

// apiRequeue requeues a dead letter through the API's dlq.requeue, asked
// from Go: refused (409) inside the duplicate window, as the command is.
func (w *nemWorld) apiRequeue() {
	type dl struct {
		id int64
		db string
	}
	var dls []dl
	w.query(func(path string, db *sql.DB) {
		for id := range w.ids(db, `SELECT CAST(id AS TEXT) FROM dead_letters WHERE message_id <> ''`) {
			n, _ := strconv.ParseInt(id, 10, 64)
			dls = append(dls, dl{n, path})
		}
	})
	slices.SortFunc(dls, func(a, b dl) int { return cmp.Compare(a.id, b.id) })
	j := pick(w.rng.IntN(1000), len(dls))
	if j < 0 {
		w.stats.NoTarget["requeue through the API"]++
		return
	}
	who, extra := w.apiWho(nemRequeue, dls[j].db)
	durable := extra[3]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code, out := 1, "no run answers"
	if nc, err := nats.Connect(w.url(), nats.MaxReconnects(0)); err == nil {
		addr, err := adminctl.Resolve(ctx, nc, w.url(), adminctl.Target{Durable: durable, Partition: -1})
		if err == nil {
			err = admin.Call(ctx, nc, addr, "dlq.requeue", admin.ByID{ID: dls[j].id, Who: who}, nil)
		}
		var e *admin.Error
		switch {
		case err == nil:
			code = 0
		case errors.As(err, &e) && e.Code != admin.CodeFailed:
			out = "skipped: code=" + e.Code + " " + err.Error() // refused: nothing done
		default:
			out = err.Error()
		}
		nc.Close()
	}
	w.apiDone(nemRequeue, who, code, out, 1)
}
