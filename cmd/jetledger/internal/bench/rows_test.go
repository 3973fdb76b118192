package bench

import (
	"context"
	"errors"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/sqlhandler"
)

// The pre-fill holds n rows, each id 32 hex digits, distinct, spread over
// the whole id space (not clustered as ULIDs are), and the ledger opens as
// a ledger.
func TestPrefillHoldsRandomIDs(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "l.db")
	const n = 5000
	if _, err := prefill(context.Background(), path, n); err != nil {
		t.Fatal(err)
	}
	st, err := ledger.Open(path, ledger.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var rows, distinct int
	var lo, hi string
	if err := st.DB().QueryRow(`SELECT count(*), count(DISTINCT message_id), min(message_id), max(message_id) FROM processed_messages`).Scan(&rows, &distinct, &lo, &hi); err != nil {
		t.Fatal(err)
	}
	hex := regexp.MustCompile(`^[0-9a-f]{32}$`)
	if rows != n || distinct != n || !hex.MatchString(lo) || !hex.MatchString(hi) || lo[0] != '0' || hi[0] != 'f' {
		t.Fatalf("the pre-fill: %d rows, %d distinct, ids %s to %s; want %d random ids over the whole space", rows, distinct, lo, hi, n)
	}
}

// Each kind of id: ULIDs in order, random ones 32 hex digits; another
// kind is refused by Validate, naming the flag.
func TestIDKinds(t *testing.T) {
	t.Parallel()
	u := idMaker(IDULID)
	if a, b := u(0), u(1); len(a) != 26 || a >= b {
		t.Errorf("ULIDs %s, %s: want 26 characters, in order", a, b)
	}
	r := idMaker(IDRandom)
	if a, b := r(0), r(1); !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(a) || a == b {
		t.Errorf("random ids %s, %s", a, b)
	}
	c := Config{Messages: 1000, PerMsgMessages: 100, Batch: 1, Rates: []int{1}, FailEvery: 2, LatencyDuration: time.Second, IDKind: "uuid"}
	var ce *ConfigError
	if err := c.Validate(); !errors.As(err, &ce) || ce.Flag != "--id-kind" {
		t.Errorf("id kind uuid: %v, want refused naming --id-kind", err)
	}
	c.IDKind, c.LedgerRows = IDRandom, -1
	if err := c.Validate(); !errors.As(err, &ce) || ce.Flag != "--ledger-rows" {
		t.Errorf("ledger rows -1: %v, want refused naming --ledger-rows", err)
	}
}

// (c) and (c_N) over the same random-id messages: each applies every
// message once, the second on top of the pre-filled rows, and the result
// says both rates and their ratio.
func TestGroupAtRowsAppliesEachMessageOnTopOfThePrefill(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	cfg := Config{JS: js, Dir: t.TempDir(), Messages: 1000, Batch: 100, IDKind: IDRandom, LedgerRows: 2000,
		Handler: sqlHandler}
	ctx := context.Background()
	if _, _, err := publish(ctx, js, "BENCH", "bench.pay", cfg.Messages, 0, cfg.IDKind); err != nil {
		t.Fatal(err)
	}
	var res Result
	rate, st, err := consumeLedger(ctx, cfg, filepath.Join(cfg.Dir, "group.db"), "group", nil)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	res.GroupPerSec = rate
	if err := groupAtRows(ctx, cfg, &res); err != nil {
		t.Fatal(err)
	}
	if res.GroupAtRowsPerSec <= 0 || res.RatioRowsOverEmpty <= 0 || res.LedgerRows != 2000 {
		t.Fatalf("the result: %+v", res)
	}
	st, err = ledger.Open(filepath.Join(cfg.Dir, "group-rows.db"), ledger.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var prefilled, applied int
	st.DB().QueryRow(`SELECT count(*) FILTER (WHERE stream = 'PREFILL'), count(*) FILTER (WHERE stream = 'BENCH') FROM processed_messages`).Scan(&prefilled, &applied)
	if prefilled != 2000 || applied != 1000 {
		t.Fatalf("the ledger of (c_N): %d pre-filled, %d applied; want 2000 and 1000", prefilled, applied)
	}
}

// The prune run measures (c) and its latency without a prune and beside
// one, each on its own copy of the pre-fill: the prune beside the runs
// removes pre-filled rows with their events rows (the count it reports),
// and each copy holds every message of its runs once.
func TestPruneDuringPrunesThePrefillBesideTheRuns(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	cfg := Config{JS: js, Dir: t.TempDir(), Messages: 1000, Batch: 100, IDKind: IDRandom, PruneRows: 3000, Rates: []int{500}, LatencyDuration: time.Second,
		Handler: sqlHandler}
	ctx := context.Background()
	if _, _, err := publish(ctx, js, "BENCH", "bench.pay", cfg.Messages, 0, IDRandom); err != nil {
		t.Fatal(err)
	}
	run, err := pruneDuring(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The prune stops when the runs beside it end, done or not (on a
	// loaded machine, not).
	if run.Pruned <= 0 || run.Pruned > int64(cfg.PruneRows) || run.PerSec <= 0 || run.PerSecDuring <= 0 || run.P99Ms <= 0 || run.P99DuringMs <= 0 {
		t.Fatalf("the prune run: %+v; want pre-filled rows pruned and both runs measured", run)
	}
	for file, prefilled := range map[string]int{"prune.db": cfg.PruneRows, "prune-during.db": cfg.PruneRows - int(run.Pruned)} {
		st, err := ledger.Open(filepath.Join(cfg.Dir, file), ledger.Config{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		var rows, events, bench int
		if err := st.DB().QueryRow(`SELECT (SELECT count(*) FROM processed_messages WHERE stream = 'PREFILL'),
			(SELECT count(*) FROM events WHERE subject = 'prefill'), (SELECT count(*) FROM processed_messages WHERE stream = 'BENCH')`).Scan(&rows, &events, &bench); err != nil {
			t.Fatal(err)
		}
		st.Close()
		if rows != prefilled || events != prefilled || bench != cfg.Messages {
			t.Errorf("%s: %d pre-filled rows, %d events rows, %d of the bench's; want %d, %d, %d", file, rows, events, bench, prefilled, prefilled, cfg.Messages)
		}
	}
}

// sqlHandler is run's built-in handler with --apply apply, as the bench
// runs it.
func sqlHandler(ctx context.Context, st *ledger.Store, apply string) (ledger.Handler, error) {
	h, err := sqlhandler.New(ctx, st, sqlhandler.Config{Apply: apply})
	if err != nil {
		return nil, err
	}
	return h.Handle, nil
}
