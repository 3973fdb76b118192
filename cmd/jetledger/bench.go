package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const benchHelp = `
Measure jetledger against plain JetStream in one run, on an embedded server
in a temporary directory:

  (a) raw       a plain JetStream consume-and-ack loop: no ledger, no guarantee
  (b) per-msg   jetledger with one transaction per message (fetched in
                batches like (c), each message committed and acked alone)
  (c) group     jetledger with group commit (--batch) and the --apply balance handler

It publishes --messages messages, consumes them with each mode on its own
durable, and prints messages/s, the ratios c/a and c/b, p50/p99 end-to-end
latency (publish to commit) of (c) at a fixed offered load (--rate for
--latency-duration), ledger bytes per message (processed_messages and its
index, from SQLite's dbstat), and peak RSS of this process. With
--rss-messages N it also runs 'jetledger run' as a child process over N
messages and reports that process's peak RSS (VmHWM).

The embedded server syncs its store as --sync-interval says, as run's does
(default always: every write before its publish is acked); the publish rate
(acked publishes per second, 2 000 in flight) shows the cost most plainly.`

// benchResult is the --json output.
type benchResult struct {
	Cores          int     `json:"cores"`
	Messages       int     `json:"messages"`
	PerMsgMessages int     `json:"per_msg_messages"`
	Batch          int     `json:"batch"`
	SyncInterval   string  `json:"sync_interval"`
	PublishPerSec  float64 `json:"publish_msgs_per_sec"`
	RawPerSec      float64 `json:"raw_msgs_per_sec"`
	PerMsgPerSec   float64 `json:"per_msg_msgs_per_sec"`
	GroupPerSec    float64 `json:"group_msgs_per_sec"`
	RatioGroupRaw  float64 `json:"ratio_group_over_raw"`
	RatioGroupPer  float64 `json:"ratio_group_over_per_msg"`
	Rate           int     `json:"latency_rate_per_sec"`
	LatencyCount   int     `json:"latency_messages"`
	P50Ms          float64 `json:"latency_p50_ms"`
	P99Ms          float64 `json:"latency_p99_ms"`
	MaxMs          float64 `json:"latency_max_ms"`
	LedgerBytesMsg float64 `json:"ledger_bytes_per_msg"`
	FileBytesMsg   float64 `json:"db_file_bytes_per_msg"`
	PeakRSSMiB     float64 `json:"bench_peak_rss_mib"`
	RunMessages    int     `json:"run_messages,omitempty"`
	RunPerSec      float64 `json:"run_msgs_per_sec,omitempty"`
	RunPeakRSSMiB  float64 `json:"run_peak_rss_mib,omitempty"`
}

const benchApply = `INSERT INTO balances (account, amount)
	VALUES (json_extract(:data, '$.account'), json_extract(:data, '$.amount'))
	ON CONFLICT (account) DO UPDATE SET amount = amount + excluded.amount`

func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var messages, perMsg, batch, rate, rssMessages int
	var latDur time.Duration
	var asJSON, keep bool
	fs := newFlags("bench", "bench [flags]", benchHelp, stdout)
	syncEvery := syncIntervalFlag(fs)
	fs.IntVar(&messages, "messages", 200_000, "messages published and consumed by (a) and (c)")
	fs.IntVar(&perMsg, "per-msg-messages", 20_000, "messages consumed by (b), which is slow; its rate is what counts")
	fs.IntVar(&batch, "batch", 500, "batch size of (c)")
	fs.IntVar(&rate, "rate", 1000, "offered load of the latency run, messages/s")
	fs.DurationVar(&latDur, "latency-duration", 5*time.Second, "length of the latency run")
	fs.IntVar(&rssMessages, "rss-messages", 0, "also run 'jetledger run' over this many messages and report its peak RSS (0: skip)")
	fs.BoolVar(&asJSON, "json", false, "print JSON")
	fs.BoolVar(&keep, "keep", false, "keep the temporary directory")
	var cpuProfile string
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of run (c) to this file")
	if err := parse(fs, args); err != nil {
		return err
	}
	if messages < 1000 || perMsg < 100 || perMsg > messages || batch < 1 || rate < 1 || latDur <= 0 || rssMessages < 0 {
		return usagef("--messages must be at least 1000, --per-msg-messages between 100 and --messages, the rest positive")
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	node, err := newScratchNode(ctx, "bench", syncEvery.interval, quiet)
	if err != nil {
		return err
	}
	defer node.Close(keep, stderr)
	dir, js := node.dir, node.js
	progress := func(format string, a ...any) {
		if !asJSON {
			fmt.Fprintf(stdout, format+"\n", a...)
		}
	}
	res := benchResult{Cores: runtime.NumCPU(), Messages: messages, PerMsgMessages: perMsg, Batch: batch, Rate: rate,
		SyncInterval: syncEvery.String()}

	// Latency first, while the process is small: the throughput runs below
	// leave hundreds of MiB of garbage whose collection would be measured too.
	progress("latency of (c) at %d messages/s for %s…", rate, latDur)
	lat, err := benchLatency(ctx, js, filepath.Join(dir, "latency.db"), batch, rate, latDur)
	if err != nil {
		return err
	}
	res.LatencyCount = len(lat)
	res.P50Ms, res.P99Ms, res.MaxMs = percentile(lat, 0.50), percentile(lat, 0.99), percentile(lat, 1)

	progress("publishing %d messages on %d cores, sync_interval %s…", messages, res.Cores, res.SyncInterval)
	if res.PublishPerSec, err = benchPublish(ctx, js, "BENCH", "bench.pay", messages); err != nil {
		return err
	}

	progress("(a) raw JetStream consume+ack…")
	if res.RawPerSec, err = benchRaw(ctx, js, messages); err != nil {
		return err
	}
	progress("(b) jetledger, one transaction per message…")
	if res.PerMsgPerSec, err = benchPerMessage(ctx, js, filepath.Join(dir, "per-msg.db"), perMsg, batch); err != nil {
		return err
	}
	progress("(c) jetledger, group commit (batch %d) with the balance handler…", batch)
	var st *ledger.Store
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	res.GroupPerSec, st, err = benchLedger(ctx, js, filepath.Join(dir, "group.db"), "group", messages, batch, nil)
	if cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return err
	}
	if res.LedgerBytesMsg, res.FileBytesMsg, err = ledgerBytes(ctx, st, messages); err != nil {
		return err
	}
	st.Close()
	res.RatioGroupRaw = res.GroupPerSec / res.RawPerSec
	res.RatioGroupPer = res.GroupPerSec / res.PerMsgPerSec

	if rssMessages > 0 {
		progress("'jetledger run' over %d messages, measuring its peak RSS…", rssMessages)
		res.RunMessages = rssMessages
		if res.RunPerSec, res.RunPeakRSSMiB, err = benchRunRSS(ctx, js, node.srv.URL(), dir, rssMessages); err != nil {
			return err
		}
	}
	res.PeakRSSMiB = selfPeakRSS()

	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	fmt.Fprintf(stdout, "\n%-40s %12s\n", "mode", "messages/s")
	fmt.Fprintf(stdout, "%-40s %12.0f\n", "publish, acked (sync_interval "+res.SyncInterval+")", res.PublishPerSec)
	fmt.Fprintf(stdout, "%-40s %12.0f\n", "(a) raw JetStream consume+ack", res.RawPerSec)
	fmt.Fprintf(stdout, "%-40s %12.0f\n", "(b) jetledger, 1 transaction/message", res.PerMsgPerSec)
	fmt.Fprintf(stdout, "%-40s %12.0f\n", fmt.Sprintf("(c) jetledger, group commit (batch %d)", batch), res.GroupPerSec)
	fmt.Fprintf(stdout, "\nc/a = %.2f   c/b = %.1f\n", res.RatioGroupRaw, res.RatioGroupPer)
	fmt.Fprintf(stdout, "latency (c) at %d msg/s, %d messages: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
		rate, res.LatencyCount, res.P50Ms, res.P99Ms, res.MaxMs)
	fmt.Fprintf(stdout, "ledger: %.0f bytes/message (processed_messages + index); whole database %.0f bytes/message\n",
		res.LedgerBytesMsg, res.FileBytesMsg)
	fmt.Fprintf(stdout, "peak RSS of this process: %.1f MiB\n", res.PeakRSSMiB)
	if res.RunMessages > 0 {
		fmt.Fprintf(stdout, "'jetledger run' over %d messages: %.0f messages/s, peak RSS %.1f MiB\n", res.RunMessages, res.RunPerSec, res.RunPeakRSSMiB)
	}
	return nil
}

func benchPayload(rng *rand.Rand, i int) []byte {
	return []byte(fmt.Sprintf(`{"account":"acct-%d","amount":%d,"n":%d}`, rng.IntN(100), 1+rng.IntN(1000), i))
}

// benchPublish creates the stream, fills it with n messages with ids, and
// returns the rate of acked publishes.
func benchPublish(ctx context.Context, js jetstream.JetStream, stream, subject string, n int) (float64, error) {
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject}, Storage: jetstream.FileStorage}); err != nil {
		return 0, fmt.Errorf("create stream %s: %w", stream, err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	const window = 2000
	futures := make([]jetstream.PubAckFuture, 0, window)
	start := time.Now()
	for i := 0; i < n; i++ {
		msg := &nats.Msg{Subject: subject, Data: benchPayload(rng, i), Header: nats.Header{}}
		msg.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("bench-%09d", i))
		f, err := js.PublishMsgAsync(msg)
		if err != nil {
			return 0, fmt.Errorf("publish: %w", err)
		}
		futures = append(futures, f)
		if len(futures) == window || i == n-1 {
			for _, f := range futures {
				select {
				case <-f.Ok():
				case err := <-f.Err():
					return 0, fmt.Errorf("publish: %w", err)
				case <-ctx.Done():
					return 0, ctx.Err()
				}
			}
			futures = futures[:0]
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// benchRaw consumes n messages with a plain Consume callback that acks each.
func benchRaw(ctx context.Context, js jetstream.JetStream, n int) (float64, error) {
	cons, err := js.CreateConsumer(ctx, "BENCH", jetstream.ConsumerConfig{Durable: "raw", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
	if err != nil {
		return 0, err
	}
	var got atomic.Int64
	done := make(chan struct{})
	start := time.Now()
	cc, err := cons.Consume(func(m jetstream.Msg) {
		m.Ack() //nolint:errcheck // the raw baseline does no more than this
		if got.Add(1) == int64(n) {
			close(done)
		}
	})
	if err != nil {
		return 0, err
	}
	defer cc.Stop()
	select {
	case <-done:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if err := js.Conn().Flush(); err != nil {
		return 0, err
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// benchLedger consumes n messages of BENCH through a ledger at path with the
// balance handler, batch messages per transaction.
func benchLedger(ctx context.Context, js jetstream.JetStream, path, durable string, n, batch int, onCommit func(consumer.BatchReport)) (float64, *ledger.Store, error) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := ledger.Open(path, ledger.Config{Logger: quiet})
	if err != nil {
		return 0, nil, err
	}
	if _, err := st.DB().ExecContext(ctx, demoSchema); err != nil {
		return 0, nil, err
	}
	h, err := newEventsHandler(ctx, st, "", benchApply)
	if err != nil {
		return 0, nil, err
	}
	var done atomic.Int64
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	c, err := consumer.New(ctx, js, st, consumer.Config{
		Stream: "BENCH", Durable: durable, Handler: h.handle, Logger: quiet,
		Plan: ackwait.Plan{BatchSize: batch},
		AfterCommit: func(r consumer.BatchReport) {
			if onCommit != nil {
				onCommit(r)
			}
			if done.Add(int64(len(r.Results))) >= int64(n) {
				cancel()
			}
		},
	})
	if err != nil {
		return 0, nil, err
	}
	start := time.Now()
	if err := c.Run(runCtx); err != nil {
		return 0, nil, err
	}
	if ctx.Err() != nil {
		return 0, nil, ctx.Err()
	}
	return float64(done.Load()) / time.Since(start).Seconds(), st, nil
}

// benchPerMessage is the per-message framework's shape: messages are fetched
// in batches like (c), but each is applied in a transaction of its own
// (ApplyBatch of one) and acked after that commit.
func benchPerMessage(ctx context.Context, js jetstream.JetStream, path string, n, batch int) (float64, error) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := ledger.Open(path, ledger.Config{Logger: quiet})
	if err != nil {
		return 0, err
	}
	defer st.Close()
	if _, err := st.DB().ExecContext(ctx, demoSchema); err != nil {
		return 0, err
	}
	h, err := newEventsHandler(ctx, st, "", benchApply)
	if err != nil {
		return 0, err
	}
	cons, err := js.CreateConsumer(ctx, "BENCH", jetstream.ConsumerConfig{Durable: "permsg", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
	if err != nil {
		return 0, err
	}
	start := time.Now()
	for done := 0; done < n; {
		b, err := cons.Fetch(min(batch, n-done), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return 0, err
		}
		for m := range b.Messages() {
			meta, err := m.Metadata()
			if err != nil {
				return 0, err
			}
			d := ledger.Delivery{MessageID: m.Headers().Get(jetstream.MsgIDHeader), Stream: meta.Stream,
				Sequence: meta.Sequence.Stream, Subject: m.Subject(), Data: m.Data(), Delivered: meta.NumDelivered}
			_, err = st.ApplyBatch(ctx, []ledger.Delivery{d}, h.handle, ledger.Budget{Work: ackwait.DeadlineDefault})
			if err != nil {
				return 0, err
			}
			m.Ack() //nolint:errcheck // as (a) and (c)
			done++
		}
		if err := b.Error(); err != nil {
			return 0, err
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// ledgerBytes reports the bytes per message of processed_messages with its
// indexes, and of the whole database file after a checkpoint.
func ledgerBytes(ctx context.Context, st *ledger.Store, n int) (ledgerPerMsg, filePerMsg float64, err error) {
	if _, err := st.DB().ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		return 0, 0, err
	}
	var ledgerBytes int64
	if err := st.DB().QueryRowContext(ctx, `SELECT sum(pgsize) FROM dbstat
		WHERE name IN (SELECT name FROM sqlite_master WHERE tbl_name = 'processed_messages')`).Scan(&ledgerBytes); err != nil {
		return 0, 0, fmt.Errorf("dbstat: %w", err)
	}
	fi, err := os.Stat(st.Path())
	if err != nil {
		return 0, 0, err
	}
	return float64(ledgerBytes) / float64(n), float64(fi.Size()) / float64(n), nil
}

// benchLatency offers rate messages/s for dur to a group-commit consumer and
// returns each message's publish-to-commit latency in milliseconds.
func benchLatency(ctx context.Context, js jetstream.JetStream, path string, batch, rate int, dur time.Duration) ([]float64, error) {
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "LAT", Subjects: []string{"lat.pay"}, Storage: jetstream.FileStorage}); err != nil {
		return nil, err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := ledger.Open(path, ledger.Config{Logger: quiet})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	if _, err := st.DB().ExecContext(ctx, demoSchema); err != nil {
		return nil, err
	}
	h, err := newEventsHandler(ctx, st, "", benchApply)
	if err != nil {
		return nil, err
	}
	total := int(float64(rate) * dur.Seconds())
	lat := make([]float64, 0, total)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	c, err := consumer.New(ctx, js, st, consumer.Config{
		Stream: "LAT", Durable: "lat", Handler: h.handle, Logger: quiet, Plan: ackwait.Plan{BatchSize: batch},
		AfterCommit: func(r consumer.BatchReport) {
			now := time.Now()
			for _, d := range r.Deliveries {
				var p struct {
					TS int64 `json:"ts"`
				}
				if json.Unmarshal(d.Data, &p) == nil {
					lat = append(lat, float64(now.UnixNano()-p.TS)/1e6)
				}
			}
			if len(lat) >= total {
				cancel()
			}
		},
	})
	if err != nil {
		return nil, err
	}
	runDone := make(chan error, 1)
	go func() { runDone <- c.Run(runCtx) }()
	// Publish on a fixed schedule: message i is due at start + i/rate.
	start := time.Now()
	interval := time.Second / time.Duration(rate)
	for i := 0; i < total && runCtx.Err() == nil; i++ {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d) // pacing the offered load, not synchronising
		}
		msg := &nats.Msg{Subject: "lat.pay", Header: nats.Header{},
			Data: []byte(fmt.Sprintf(`{"account":"acct-%d","amount":1,"ts":%d}`, i%100, time.Now().UnixNano()))}
		msg.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("lat-%09d", i))
		if _, err := js.PublishMsgAsync(msg); err != nil {
			return nil, err
		}
	}
	select {
	case err := <-runDone:
		if err != nil {
			return nil, err
		}
	case <-time.After(dur + 30*time.Second):
		cancel()
		<-runDone
		return nil, fmt.Errorf("latency run: %d of %d messages committed", len(lat), total)
	}
	return lat, nil
}

func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// benchRunRSS runs `jetledger run` as a child over n messages of a fresh
// stream and returns its rate and peak RSS (VmHWM) in MiB.
func benchRunRSS(ctx context.Context, js jetstream.JetStream, url, dir string, n int) (float64, float64, error) {
	if _, err := benchPublish(ctx, js, "RSS", "rss.pay", n); err != nil {
		return 0, 0, err
	}
	schema := filepath.Join(dir, "rss-schema.sql")
	if err := os.WriteFile(schema, []byte(demoSchema), 0o600); err != nil {
		return 0, 0, err
	}
	self, err := os.Executable()
	if err != nil {
		return 0, 0, err
	}
	cmd := exec.CommandContext(ctx, self, "run", "--nats", url, "--db", filepath.Join(dir, "rss.db"), "--stream", "RSS",
		"--schema", schema, "--apply", benchApply, "--batch", "500", "--log-level", "warn")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck // it may have exited
		cmd.Wait()                          //nolint:errcheck // exit status is not the measurement
	}()
	start := time.Now()
	peak := 0.0
	for {
		if rss, err := vmHWM(cmd.Process.Pid); err == nil {
			peak = max(peak, rss)
		}
		cons, err := js.Consumer(ctx, "RSS", consumer.DurableDefault)
		if err == nil {
			if info, err := cons.Info(ctx); err == nil && info.AckFloor.Stream >= uint64(n) {
				break
			}
		}
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	rate := float64(n) / time.Since(start).Seconds()
	if rss, err := vmHWM(cmd.Process.Pid); err == nil {
		peak = max(peak, rss)
	}
	return rate, peak, nil
}

// vmHWM reads a process's peak resident set size from /proc, in MiB.
func vmHWM(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, err := strconv.ParseFloat(f[1], 64)
			return kb / 1024, err
		}
	}
	return 0, errors.New("no VmHWM in /proc status")
}

func selfPeakRSS() float64 {
	rss, err := vmHWM(os.Getpid())
	if err != nil {
		return 0
	}
	return rss
}
