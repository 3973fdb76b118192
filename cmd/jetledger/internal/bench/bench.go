// Package bench measures jetledger against plain JetStream in one run, on
// a server the caller provides (jetledger bench starts an embedded one in a
// temporary directory):
//
//   - (a) raw: a plain JetStream consume-and-ack loop, no ledger, no guarantee;
//   - (b) per-msg: jetledger with one transaction per message, fetched in
//     batches like (c), each message committed and acked alone;
//   - (c) group: jetledger with group commit and the balance handler.
//
// It reports messages/s, the ratios c/a and c/b, p50/p99 publish-to-commit
// latency of (c) at a fixed offered load, ledger bytes per message, the peak
// RSS of this process and, optionally, that of a real `jetledger run`.
// It reads /proc for RSS, so those figures are Linux only (zero elsewhere).
package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// Schema and Apply are the balance handler of (b), (c) and the latency run:
// the --schema and --apply of `jetledger run`.
const (
	Schema = `CREATE TABLE IF NOT EXISTS balances (account TEXT PRIMARY KEY, amount INTEGER NOT NULL)`
	Apply  = `INSERT INTO balances (account, amount)
	VALUES (json_extract(:data, '$.account'), json_extract(:data, '$.amount'))
	ON CONFLICT (account) DO UPDATE SET amount = amount + excluded.amount`
)

// quiet is the logger of everything measured: the bench reports, it does not log.
var quiet = slog.New(slog.DiscardHandler)

// Config is one benchmark run.
type Config struct {
	JS  jetstream.JetStream // a client of the server the run uses
	URL string              // that server's URL, for the `jetledger run` child
	Dir string              // scratch directory for the databases
	// Binary is the jetledger binary that the RSS run starts as `run`.
	Binary string
	// Handler returns run's built-in handler with --apply apply on st.
	Handler func(ctx context.Context, st *ledger.Store, apply string) (ledger.Handler, error)

	Messages        int           // published and consumed by (a) and (c); at least 1000
	PerMsgMessages  int           // consumed by (b); 100 up to Messages
	Batch           int           // batch size of (c)
	Rates           []int         // offered loads of the latency runs, messages/s
	LatencyDuration time.Duration // length of each latency run
	FailEvery       int           // the failing run's handler fails one message in this many
	PayloadBytes    int           // size of each payload, padded; 0 for the smallest (about 45 bytes)
	RSSMessages     int           // messages of the RSS runs; 0 skips them
	RSSRate         int           // lines a second fed to the edge RSS run, with pruning (edgePruning); 0: as fast as it takes them
	EdgeMemoryLimit string        // --memory-limit of the edge RSS run; empty for none
	SyncInterval    string        // how the server syncs its store, reported as is
	CPUProfile      string        // file for a CPU profile of (c); empty for none
	Progress        io.Writer     // progress lines; nil for none
	// Partitions are the partition counts of the scale run (Scale, in
	// scale.go), on a 3-node cluster of its own; empty for none.
	Partitions    []int
	ScaleMessages int // published for each partition count of the scale run; at least 1000
	// IDKind is the kind of message id published: IDULID (the default) or
	// IDRandom.
	IDKind string
	// LedgerRows, when set, runs (c) again on a ledger pre-filled with so
	// many rows of random ids, beside (c) on an empty one.
	LedgerRows int
	// PruneRows, when set, measures (c) and its latency on a ledger
	// pre-filled with so many prunable rows, without a prune and while one
	// runs (pruneDuring, in prune.go).
	PruneRows int
	// Changelog adds the step (c_N+cl) to each partition count of the
	// scale run: (c_N) with each partition's ledger on its changelog, R3.
	// It needs Partitions.
	Changelog bool

	// onChangelog, if set, is called with each row's changelogs after
	// (c_N+cl), before they are deleted: a test reads them back.
	onChangelog func(ctx context.Context, logs []*changelog.Log) error
	// ledgerPath, if set, is the ledger of the latency run instead of one
	// of its own; alongside, if set, runs beside each latency and (c) run
	// on its ledger until the run ends (a prune, say).
	ledgerPath string
	alongside  func(ctx context.Context, st *ledger.Store)
}

// ErrConfig is a Config out of its ranges; the error is a *ConfigError.
var ErrConfig = errors.New("bench: invalid configuration")

// ConfigError names the field out of range by its flag of `jetledger
// bench`, the one user of this package.
type ConfigError struct {
	Flag string
	Got  any
	Want string
}

func (e *ConfigError) Error() string { return fmt.Sprintf("%s %v: want %s", e.Flag, e.Got, e.Want) }

// Is makes a ConfigError ErrConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrConfig }

// Validate checks the ranges, before any I/O.
func (c Config) Validate() error {
	for _, f := range []struct {
		flag     string
		got, min int
		want     string
	}{
		{"--messages", c.Messages, 1000, "at least 1000"},
		{"--per-msg-messages", c.PerMsgMessages, 100, "100 up to --messages"},
		{"--batch", c.Batch, 1, "at least 1"},
		{"--fail-every", c.FailEvery, 2, "at least 2"},
		{"--rss-messages", c.RSSMessages, 0, "0 (none) or more"},
		{"--rss-rate", c.RSSRate, 0, "0 (as fast as it goes) or more"},
		{"--payload-bytes", c.PayloadBytes, 0, "0 (the smallest) up to 65536"},
		{"--ledger-rows", c.LedgerRows, 0, "0 (none) or more"},
		{"--prune-rows", c.PruneRows, 0, "0 (none) or more"},
	} {
		if f.got < f.min {
			return &ConfigError{Flag: f.flag, Got: f.got, Want: f.want}
		}
	}
	if c.IDKind != "" && c.IDKind != IDULID && c.IDKind != IDRandom {
		return &ConfigError{Flag: "--id-kind", Got: c.IDKind, Want: IDULID + " or " + IDRandom}
	}
	if len(c.Rates) == 0 {
		return &ConfigError{Flag: "--rate", Got: "none", Want: "one or more rates"}
	}
	for _, r := range c.Rates {
		if r < 1 || r > 1_000_000 {
			return &ConfigError{Flag: "--rate", Got: r, Want: "1 to 1000000 messages/s"}
		}
	}
	switch {
	case c.PayloadBytes > 65536:
		return &ConfigError{Flag: "--payload-bytes", Got: c.PayloadBytes, Want: "0 (the smallest) up to 65536"}
	case c.PerMsgMessages > c.Messages:
		return &ConfigError{Flag: "--per-msg-messages", Got: c.PerMsgMessages, Want: "100 up to --messages"}
	case c.LatencyDuration <= 0:
		return &ConfigError{Flag: "--latency-duration", Got: c.LatencyDuration, Want: "a positive duration"}
	}
	return c.validateScale()
}

// Result is what a run measured (jetledger bench --json).
type Result struct {
	Cores          int     `json:"cores"`
	Messages       int     `json:"messages"`
	PerMsgMessages int     `json:"per_msg_messages"`
	Batch          int     `json:"batch"`
	IDKind         string  `json:"id_kind"`
	SyncInterval   string  `json:"sync_interval"`
	PublishPerSec  float64 `json:"publish_msgs_per_sec"`
	RawPerSec      float64 `json:"raw_msgs_per_sec"`
	PerMsgPerSec   float64 `json:"per_msg_msgs_per_sec"`
	GroupPerSec    float64 `json:"group_msgs_per_sec"`
	FailEvery      int     `json:"fail_every"`
	FailingPerSec  float64 `json:"failing_msgs_per_sec"`
	ExpertPerSec   float64 `json:"expert_msgs_per_sec"`
	RatioGroupRaw  float64 `json:"ratio_group_over_raw"`
	RatioGroupPer  float64 `json:"ratio_group_over_per_msg"`
	RatioFailing   float64 `json:"ratio_failing_over_group"`
	RatioExpert    float64 `json:"ratio_group_over_expert"`
	// (c) again on a ledger pre-filled with LedgerRows rows (0: not run),
	// and its rate over (c)'s on an empty ledger, in the same run.
	LedgerRows         int       `json:"ledger_rows,omitempty"`
	PrefillSeconds     float64   `json:"prefill_seconds,omitempty"`
	IndexReadSeconds   float64   `json:"index_read_seconds,omitempty"` // the pre-filled ledger's index of ids read at open, before (c_N)
	GroupAtRowsPerSec  float64   `json:"group_at_rows_msgs_per_sec,omitempty"`
	RatioRowsOverEmpty float64   `json:"ratio_group_at_rows_over_empty,omitempty"`
	Prune              *PruneRun `json:"prune,omitempty"`
	Latency            []Latency `json:"latency"`
	PayloadBytes       int       `json:"payload_bytes"` // of (a)-(e): the mean size published
	LedgerBytesMsg     float64   `json:"ledger_bytes_per_msg"`
	EventsBytesMsg     float64   `json:"events_bytes_per_msg"`
	FileBytesMsg       float64   `json:"db_file_bytes_per_msg"`
	PeakRSSMiB         float64   `json:"bench_peak_rss_mib"`
	RunMessages        int       `json:"run_messages,omitempty"`
	RunPerSec          float64   `json:"run_msgs_per_sec,omitempty"`
	RunPeakRSSMiB      float64   `json:"run_peak_rss_mib,omitempty"`
	// The edge default: run with its embedded server, fed by jetledger publish.
	EdgeMemoryLimit string  `json:"edge_memory_limit,omitempty"`
	EdgeRate        int     `json:"edge_offered_per_sec,omitempty"` // paced, with pruning; 0: as fast as it goes
	EdgePerSec      float64 `json:"edge_msgs_per_sec,omitempty"`
	EdgePeakRSSMiB  float64 `json:"edge_peak_rss_mib,omitempty"`
	EdgeHalfRSSMiB  float64 `json:"edge_peak_rss_at_half_time_mib,omitempty"`
}

// Latency is publish-to-commit latency of (c) at one offered load: from
// each message's due time to its batch's commit on disk.
type Latency struct {
	Rate     int     `json:"rate_per_sec"`
	Messages int     `json:"messages"`
	P50Ms    float64 `json:"p50_ms"`
	P99Ms    float64 `json:"p99_ms"`
	P999Ms   float64 `json:"p999_ms"`
	MaxMs    float64 `json:"max_ms"`
	// Stages are the steps of that time, in order (stageNames), and the
	// ack after it.
	Stages []Stage `json:"stages"`
}

// Stage is one step of a message's latency, over every message, and its
// mean over the slowest 1 % (by latency): where their time went.
type Stage struct {
	Name          string  `json:"name"`
	P50Ms         float64 `json:"p50_ms"`
	P99Ms         float64 `json:"p99_ms"`
	P999Ms        float64 `json:"p999_ms"`
	MaxMs         float64 `json:"max_ms"`
	SlowestMeanMs float64 `json:"slowest_1pct_mean_ms"`
}

// Run measures every mode in turn.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	res := Result{Cores: runtime.NumCPU(), Messages: cfg.Messages, PerMsgMessages: cfg.PerMsgMessages,
		Batch: cfg.Batch, SyncInterval: cfg.SyncInterval, FailEvery: cfg.FailEvery, IDKind: cmp.Or(cfg.IDKind, IDULID)}
	// Latency first, while the process is small: the throughput runs below
	// leave hundreds of MiB of garbage whose collection would be measured too.
	for i, rate := range cfg.Rates {
		cfg.progress("latency of (c) at %d messages/s for %s…", rate, cfg.LatencyDuration)
		// Dirty pages other work left behind (an earlier bench writes GBs)
		// are written back first, not during the run: their writeback
		// stalled the fsyncs measured here by tens of ms.
		syncDisks()
		lat, err := latency(ctx, cfg, i, rate)
		if err != nil {
			return res, err
		}
		res.Latency = append(res.Latency, lat)
	}
	var err error

	cfg.progress("publishing %d messages on %d cores, sync_interval %s…", cfg.Messages, res.Cores, res.SyncInterval)
	if res.PublishPerSec, res.PayloadBytes, err = publish(ctx, cfg.JS, "BENCH", "bench.pay", cfg.Messages, cfg.PayloadBytes, res.IDKind); err != nil {
		return res, err
	}
	cfg.progress("(a) raw JetStream consume+ack…")
	if res.RawPerSec, err = raw(ctx, cfg.JS, cfg.Messages); err != nil {
		return res, err
	}
	cfg.progress("(b) jetledger, one transaction per message…")
	if res.PerMsgPerSec, err = perMessage(ctx, cfg); err != nil {
		return res, err
	}
	cfg.progress("(c) jetledger, group commit (batch %d) with the balance handler…", cfg.Batch)
	if err := group(ctx, cfg, &res); err != nil {
		return res, err
	}
	if cfg.LedgerRows > 0 {
		if err := groupAtRows(ctx, cfg, &res); err != nil {
			return res, err
		}
	}
	if cfg.PruneRows > 0 {
		if res.Prune, err = pruneDuring(ctx, cfg); err != nil {
			return res, err
		}
	}
	cfg.progress("(d) (c) with a handler failing 1 message in %d…", cfg.FailEvery)
	if res.FailingPerSec, err = failing(ctx, cfg); err != nil {
		return res, err
	}
	res.RatioFailing = res.FailingPerSec / res.GroupPerSec
	cfg.progress("(e) a hand-written batch loop: Fetch %d, one transaction, INSERT OR IGNORE + upsert per message, commit, ack each…", cfg.Batch)
	if res.ExpertPerSec, err = expert(ctx, cfg); err != nil {
		return res, err
	}
	res.RatioExpert = res.GroupPerSec / res.ExpertPerSec
	if cfg.RSSMessages > 0 {
		cfg.progress("'jetledger run' over %d messages, measuring its peak RSS…", cfg.RSSMessages)
		res.RunMessages = cfg.RSSMessages
		if res.RunPerSec, res.RunPeakRSSMiB, err = runRSS(ctx, cfg); err != nil {
			return res, err
		}
		cfg.progress("'jetledger run' with its embedded server (--memory-limit %s), fed %d messages by 'jetledger publish', measuring its peak RSS…",
			cmp.Or(cfg.EdgeMemoryLimit, "none"), cfg.RSSMessages)
		res.EdgeMemoryLimit, res.EdgeRate = cfg.EdgeMemoryLimit, cfg.RSSRate
		if res.EdgePerSec, res.EdgePeakRSSMiB, res.EdgeHalfRSSMiB, err = edgeRSS(ctx, cfg); err != nil {
			return res, err
		}
	}
	res.PeakRSSMiB = selfPeakRSS()
	return res, nil
}

// profile starts a CPU profile into cfg.CPUProfile plus suffix, if asked,
// and returns what stops it.
func (c Config) profile(suffix string) (stop func(), err error) {
	if c.CPUProfile == "" {
		return func() {}, nil
	}
	f, err := os.Create(c.CPUProfile + suffix)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// group runs (c), with a CPU profile if asked, and measures its ledger.
func group(ctx context.Context, cfg Config, res *Result) error {
	stop, err := cfg.profile("")
	if err != nil {
		return err
	}
	rate, st, err := consumeLedger(ctx, cfg, filepath.Join(cfg.Dir, "group.db"), "group", nil)
	stop()
	if err != nil {
		return err
	}
	defer st.Close()
	res.GroupPerSec = rate
	if res.LedgerBytesMsg, res.EventsBytesMsg, res.FileBytesMsg, err = ledgerBytes(ctx, st, cfg.Messages); err != nil {
		return err
	}
	res.RatioGroupRaw = res.GroupPerSec / res.RawPerSec
	res.RatioGroupPer = res.GroupPerSec / res.PerMsgPerSec
	return nil
}

func (c Config) progress(format string, a ...any) {
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, format+"\n", a...)
	}
}

// WriteText prints the result as a table.
func (r Result) WriteText(w io.Writer) {
	fmt.Fprintf(w, "\n%-52s %12s\n", "mode", "messages/s")
	fmt.Fprintf(w, "%-52s %12.0f\n", "publish, acked (sync_interval "+r.SyncInterval+")", r.PublishPerSec)
	fmt.Fprintf(w, "%-52s %12.0f\n", "(a) raw JetStream consume+ack", r.RawPerSec)
	fmt.Fprintf(w, "%-52s %12.0f\n", "(b) jetledger, 1 transaction/message", r.PerMsgPerSec)
	fmt.Fprintf(w, "%-52s %12.0f\n", fmt.Sprintf("(c) jetledger, group commit (batch %d)", r.Batch), r.GroupPerSec)
	fmt.Fprintf(w, "%-52s %12.0f\n", fmt.Sprintf("(d) (c), handler failing 1 message in %d", r.FailEvery), r.FailingPerSec)
	fmt.Fprintf(w, "%-52s %12.0f\n", "(e) hand-written batch loop, same SQLite", r.ExpertPerSec)
	if r.LedgerRows > 0 {
		fmt.Fprintf(w, "%-52s %12.0f\n", fmt.Sprintf("(c_N) (c) on a ledger of N = %d rows", r.LedgerRows), r.GroupAtRowsPerSec)
	}
	fmt.Fprintf(w, "\nc/a = %.2f   c/b = %.1f   d/c = %.2f   c/e = %.2f   (ids: %s)\n", r.RatioGroupRaw, r.RatioGroupPer, r.RatioFailing, r.RatioExpert, r.IDKind)
	if r.LedgerRows > 0 {
		fmt.Fprintf(w, "c_N/c = %.2f at N = %d (pre-filled in %.0f s; its index of ids read in %.1f s before (c_N), as run does at start)\n",
			r.RatioRowsOverEmpty, r.LedgerRows, r.PrefillSeconds, r.IndexReadSeconds)
	}
	r.Prune.writeText(w)
	fmt.Fprintf(w, "\n%-34s %9s %9s %9s %9s %9s\n", "latency of (c), publish to commit", "messages", "p50 ms", "p99 ms", "p99.9 ms", "max ms")
	for _, l := range r.Latency {
		fmt.Fprintf(w, "%-34s %9d %9.2f %9.2f %9.2f %9.2f\n", fmt.Sprintf("at %d msg/s", l.Rate), l.Messages, l.P50Ms, l.P99Ms, l.P999Ms, l.MaxMs)
	}
	for _, l := range r.Latency {
		fmt.Fprintf(w, "\n%-34s %9s %9s %9s %9s %13s\n", fmt.Sprintf("stages at %d msg/s, each from the last", l.Rate), "p50 ms", "p99 ms", "p99.9 ms", "max ms", "slowest 1 %")
		for _, s := range l.Stages {
			fmt.Fprintf(w, "%-34s %9.2f %9.2f %9.2f %9.2f %13.2f\n", s.Name, s.P50Ms, s.P99Ms, s.P999Ms, s.MaxMs, s.SlowestMeanMs)
		}
	}
	fmt.Fprintf(w, "\nledger of (c), %d-byte payloads: %.0f bytes/message in processed_messages + index, %.0f in events + index; whole database %.0f bytes/message\n",
		r.PayloadBytes, r.LedgerBytesMsg, r.EventsBytesMsg, r.FileBytesMsg)
	fmt.Fprintf(w, "peak RSS of this process: %.1f MiB\n", r.PeakRSSMiB)
	if r.RunMessages > 0 {
		fmt.Fprintf(w, "'jetledger run' over %d messages: %.0f messages/s, peak RSS %.1f MiB\n", r.RunMessages, r.RunPerSec, r.RunPeakRSSMiB)
		offered := "as fast as it takes them"
		if r.EdgeRate > 0 {
			offered = fmt.Sprintf("%d/s, pruning", r.EdgeRate)
		}
		fmt.Fprintf(w, "'jetledger run' with its embedded server (--memory-limit %s), %d messages from 'jetledger publish' (%s): %.0f messages/s, peak RSS %.1f MiB (%.1f at half time)\n",
			cmp.Or(r.EdgeMemoryLimit, "none"), r.RunMessages, offered, r.EdgePerSec, r.EdgePeakRSSMiB, r.EdgeHalfRSSMiB)
	}
}
