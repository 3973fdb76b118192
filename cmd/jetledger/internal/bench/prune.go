package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/ledger"
)

// PruneRun is (c) and its latency on a ledger of Rows prunable rows, first
// alone, then while a prune of those rows runs (the consumer's own, on its
// store, as run's pruner does): what a week's prune costs the batches.
type PruneRun struct {
	Rows           int     `json:"rows"`
	PrefillSeconds float64 `json:"prefill_seconds"`
	Rate           int     `json:"latency_rate_per_sec"` // offered load of both latency runs
	P99Ms          float64 `json:"p99_ms"`
	P99DuringMs    float64 `json:"p99_during_prune_ms"`
	P50Ms          float64 `json:"p50_ms"`
	P50DuringMs    float64 `json:"p50_during_prune_ms"`
	PerSec         float64 `json:"group_msgs_per_sec"`
	PerSecDuring   float64 `json:"group_during_prune_msgs_per_sec"`
	RatioP99       float64 `json:"ratio_p99_during_over_without"`
	RatioPerSec    float64 `json:"ratio_group_during_over_without"`
	Pruned         int64   `json:"rows_pruned_during"` // by the prune, over both runs beside it
	Held           float64 `json:"prune_held_writer_seconds"`
	Seconds        float64 `json:"prune_seconds"` // the prune's time beside the runs
	// Stages and StagesDuring are the latency runs' stages without and
	// beside the prune: which step the prune slows.
	Stages       []Stage `json:"stages"`
	StagesDuring []Stage `json:"stages_during_prune"`
}

// pruneStream is the stream of the pre-filled rows.
const pruneStream = "PREFILL"

// pruneDuring pre-fills a ledger with cfg.PruneRows rows (each with its
// events row, as the built-in handler writes, all past any retention),
// runs the latency at cfg.Rates[0] and (c) on it, then both again (new
// stream, new durable) while a prune of the rows runs on the consumer's
// store.
func pruneDuring(ctx context.Context, cfg Config) (*PruneRun, error) {
	path := filepath.Join(cfg.Dir, "prune.db")
	st, _, err := openLedger(ctx, cfg, path, nil) // the handler's events table, for the pre-fill
	if err != nil {
		return nil, err
	}
	st.Close()
	cfg.progress("pre-filling a ledger with %d prunable rows and their events rows…", cfg.PruneRows)
	took, err := prefill(ctx, path, cfg.PruneRows)
	if err != nil {
		return nil, err
	}
	run := &PruneRun{Rows: cfg.PruneRows, PrefillSeconds: took.Seconds(), Rate: cfg.Rates[0]}
	// The runs beside the prune get a copy: the same messages on the first
	// ledger would all be duplicates.
	copied := filepath.Join(cfg.Dir, "prune-during.db")
	if err := copyFile(path, copied); err != nil {
		return nil, err
	}
	cfg.ledgerPath = path
	cfg.progress("latency of (c) at %d messages/s and (c) on it, no prune…", run.Rate)
	syncDisks() // the pre-fill and the copy left GBs to write back, which would stall the fsyncs measured
	alone, err := latency(ctx, cfg, 100, run.Rate)
	if err != nil {
		return nil, err
	}
	if run.PerSec, err = closeAfter(consumeLedger(ctx, cfg, path, "prune-without", nil)); err != nil {
		return nil, err
	}
	var mu sync.Mutex
	cfg.alongside = func(ctx context.Context, st *ledger.Store) {
		began := time.Now()
		res, err := st.Prune(ctx, ledger.PruneOptions{Stream: pruneStream, FirstSeq: 1 << 62, Hold: ackwait.Plan{}.PruneHold(), AlsoFrom: []string{"events"}})
		if err != nil && ctx.Err() == nil {
			cfg.progress("the prune failed: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		run.Pruned += res.Processed
		run.Held += res.Held.Seconds()
		run.Seconds += time.Since(began).Seconds()
	}
	cfg.progress("the same on a copy of the ledger while a prune of its rows runs…")
	cfg.ledgerPath = copied
	syncDisks()
	stopProfile, err := cfg.profile(".prune") // where the prune's CPU goes, beside the batches
	if err != nil {
		return nil, err
	}
	during, err := latency(ctx, cfg, 101, run.Rate)
	stopProfile()
	if err != nil {
		return nil, err
	}
	if run.PerSecDuring, err = closeAfter(consumeLedger(ctx, cfg, copied, "prune-during", nil)); err != nil {
		return nil, err
	}
	run.P50Ms, run.P99Ms, run.P50DuringMs, run.P99DuringMs = alone.P50Ms, alone.P99Ms, during.P50Ms, during.P99Ms
	run.RatioP99, run.RatioPerSec = run.P99DuringMs/run.P99Ms, run.PerSecDuring/run.PerSec
	run.Stages, run.StagesDuring = alone.Stages, during.Stages
	return run, nil
}

// copyFile copies a closed ledger file (no WAL beside it) from to to.
func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// closeAfter closes a run's store and returns its rate.
func closeAfter(rate float64, st *ledger.Store, err error) (float64, error) {
	if err != nil {
		return 0, err
	}
	return rate, st.Close()
}

// startAlongside starts c.alongside on st, if set, and returns what stops it
// and waits for it.
func (c Config) startAlongside(ctx context.Context, st *ledger.Store) (stop func()) {
	if c.alongside == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.alongside(ctx, st)
	}()
	return func() {
		cancel()
		<-done
	}
}

// writeText prints the prune run, if there was one.
func (r *PruneRun) writeText(w io.Writer) {
	if r == nil {
		return
	}
	fmt.Fprintf(w, "\n%-40s %12s %12s %8s\n", fmt.Sprintf("on a ledger of %d prunable rows", r.Rows), "no prune", "prune runs", "ratio")
	fmt.Fprintf(w, "%-40s %12.0f %12.0f %8.2f\n", "(c) messages/s", r.PerSec, r.PerSecDuring, r.RatioPerSec)
	fmt.Fprintf(w, "%-40s %12.2f %12.2f %8.2f\n", fmt.Sprintf("p50 ms at %d msg/s", r.Rate), r.P50Ms, r.P50DuringMs, r.P50DuringMs/r.P50Ms)
	fmt.Fprintf(w, "%-40s %12.2f %12.2f %8.2f\n", fmt.Sprintf("p99 ms at %d msg/s", r.Rate), r.P99Ms, r.P99DuringMs, r.RatioP99)
	fmt.Fprintf(w, "the prune removed %d rows in %.0f s beside the runs, holding the writer %.0f %% of it (pre-fill %.0f s)\n",
		r.Pruned, r.Seconds, 100*r.Held/max(r.Seconds, 1e-9), r.PrefillSeconds)
	fmt.Fprintf(w, "%-40s %12s %12s\n", "stages, slowest 1 %'s mean ms", "no prune", "prune runs")
	for i := range min(len(r.Stages), len(r.StagesDuring)) {
		fmt.Fprintf(w, "%-40s %12.2f %12.2f\n", r.Stages[i].Name, r.Stages[i].SlowestMeanMs, r.StagesDuring[i].SlowestMeanMs)
	}
}
