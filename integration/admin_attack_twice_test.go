package integration

import (
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/ledger"
)

// Promise 1: two operators run the same bulk resolve on the same rows at
// once: both dry runs, then both actions together. Each row changes once,
// with one record; the loser's rows are reported skipped as changed; the
// two answers split the rows. Then two CLIs retry every failed row at once
// (`--status failed --all`): each row requeued once, one record each, the
// CLIs' done counts adding up to the rows.
func TestAdminAttackTwoOperatorsSameBulkAtOnce(t *testing.T) {
	t.Parallel()
	const n = 400
	w, run, db, addr := reviewWorld(t, n)
	nc := w.js.Conn()
	var dry [2]admin.Acted
	for i := range dry {
		if err := callAdmin(nc, addr, "outbox.resolve", admin.Act{Who: fmt.Sprintf("op%d", i), Status: ledger.StatusReview, As: ledger.StatusFailed, DryRun: true}, &dry[i], 10*time.Second); err != nil || dry[i].Matched != n {
			t.Fatalf("operator %d's dry run: %v %+v", i, err, dry[i].Matched)
		}
	}
	var done [2]admin.Acted
	var errs [2]error
	var wg sync.WaitGroup
	for i := range done {
		wg.Go(func() {
			errs[i] = callAdmin(nc, addr, "outbox.resolve", admin.Act{Who: fmt.Sprintf("op%d", i), IDs: dry[i].IDs, Seen: dry[i].Seen, As: ledger.StatusFailed}, &done[i], time.Minute)
		})
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("the actions: %v / %v", errs[0], errs[1])
	}
	byRow := map[string]int{}
	for i := range done {
		for _, id := range done[i].Done {
			byRow[id]++
		}
		for _, s := range done[i].Skipped {
			if !s.Changed {
				t.Errorf("operator %d: %s skipped for another reason than a change: %s", i, s.ID, s.Reason)
			}
		}
		if len(done[i].Done)+len(done[i].Skipped) != n {
			t.Errorf("operator %d: %d done + %d skipped, want %d", i, len(done[i].Done), len(done[i].Skipped), n)
		}
	}
	for id, k := range byRow {
		if k != 1 {
			t.Errorf("row %s done by %d operators", id, k)
		}
	}
	if len(byRow) != n {
		t.Errorf("%d rows done in all, want %d", len(byRow), n)
	}
	recs := auditInvariants(t, db, "op_", "failed")
	if recs != n || count(t, db, `SELECT count(*) FROM (SELECT target FROM jetledger_audit GROUP BY target HAVING count(*) > 1)`) != 0 {
		t.Errorf("%d records, want %d, one per row", recs, n)
	}
	t.Logf("op0 did %d, op1 did %d", len(done[0].Done), len(done[1].Done))

	// Two CLIs retry every failed row at once. The destination still
	// answers 500, so retried rows go back to review: count records.
	url := w.srv.ClientURL()
	var outs [2]string
	var codes [2]int
	for i := range outs {
		wg.Go(func() {
			outs[i], codes[i] = cli(t, "outbox", "retry", "--nats", url, "--status", "failed", "--all", "--who", fmt.Sprintf("cli%d", i))
		})
	}
	wg.Wait()
	doneRe := regexp.MustCompile(`(\d+) done, (\d+) skipped`)
	total := 0
	for i, out := range outs {
		m := doneRe.FindStringSubmatch(out)
		if m == nil {
			if codes[i] != 0 || !regexp.MustCompile(`^0 rows to retry`).MatchString(out) {
				t.Errorf("CLI %d: exit %d\n%s", i, codes[i], out)
			}
			continue
		}
		d, _ := strconv.Atoi(m[1])
		total += d
		t.Logf("CLI %d: exit %d: %s", i, codes[i], m[0])
	}
	retried := count(t, db, `SELECT count(*) FROM jetledger_audit WHERE who IN ('cli0', 'cli1')`)
	if total != n || retried != n {
		t.Errorf("the CLIs said %d done, the ledger holds %d records of them; want %d", total, retried, n)
	}
	if k := count(t, db, `SELECT count(*) FROM (SELECT target FROM jetledger_audit WHERE who IN ('cli0', 'cli1') GROUP BY target HAVING count(*) > 1)`); k != 0 {
		t.Errorf("%d rows retried twice", k)
	}
	run.signal(syscall.SIGTERM)
	if code := run.wait(time.Minute); code != 0 {
		t.Fatalf("run exited %d", code)
	}
}
