package integration

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
	"github.com/jetledger/jetledger/integration/lazyfs"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// powerCuts configures a power-cut run: the real binary with its embedded
// server, the JetStream store and the ledger both on a lazyfs mount, fed by
// `jetledger publish` in small runs, its effects going to a webhook. A cut
// SIGKILLs every process, drops what was not synced and remounts.
type powerCuts struct {
	Cuts int      // power cuts before the final, clean run
	Seed uint64   // of the cut moments and the events
	Run  []string // extra flags of run
	Env  []string // extra environment of run
	// tolerate counts losses without failing: the runs whose losses are
	// the measurement.
	tolerate bool
	// noWebhook runs without effects: then only the consumer's own
	// pipelined commits write the ledger, and nothing but its WAL sync
	// (and the checkpoints, once the WAL fills) makes them durable.
	noWebhook bool
}

// powerReport is what a power-cut run found.
type powerReport struct {
	soakReport
	Cuts int `json:"cuts"`
	// StreamMissing is the most acked publishes missing from the stream
	// after a restart (at least: a publish the test counted as uncertain
	// may stand in for one), whether or not run had applied them.
	StreamMissing int `json:"stream_missing"`
}

// JETLEDGER_POWER=long selects the long profile: 20 cuts.
func powerCutsFromEnv(short int) int {
	if os.Getenv("JETLEDGER_POWER") == "long" {
		return 20
	}
	if v, err := strconv.Atoi(os.Getenv("JETLEDGER_POWER_CUTS")); err == nil && v > 0 {
		return v
	}
	return short
}

// publishChunk is how many events one `jetledger publish` sends. It
// prints each ack as it comes, so even of the chunk a cut stopped the
// acked events are known; only the rest are uncertain.
const publishChunk = 50

func runPowerCuts(t *testing.T, cfg powerCuts) powerReport {
	t.Helper()
	root := t.TempDir()
	backing, mnt := filepath.Join(root, "backing"), filepath.Join(root, "mnt")
	for _, d := range []string{backing, mnt} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	schema := filepath.Join(root, "schema.sql")
	if err := os.WriteFile(schema, []byte(balanceTable), 0o600); err != nil {
		t.Fatal(err)
	}
	dest := webhooktest.NewDestination(t, false)
	url := fmt.Sprintf("nats://127.0.0.1:%d", freePort(t))
	runArgs := append([]string{"run", "--db", filepath.Join(mnt, "ledger.db"), "--listen", url[len("nats://"):],
		"--stream", stream, "--subjects", "ev.>", "--schema", schema, "--apply", balanceApply, "--log-format", "json",
		"--batch", "50", "--max-deliver", "-1"}, append(fastPlan, cfg.Run...)...)
	if !cfg.noWebhook {
		runArgs = append(runArgs, webhookArgs(dest)...)
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 11))
	var (
		mu                   sync.Mutex
		published, uncertain = map[string]event{}, map[string]event{}
		next                 int
	)
	newChunk := func() []event {
		evs := make([]event, publishChunk)
		for i := range evs {
			next++
			evs[i] = event{ID: fmt.Sprintf("pc-%07d", next), Account: fmt.Sprintf("acct-%d", rng.IntN(20)), Amount: 1 + rng.IntN(1000)}
		}
		return evs
	}
	rep := powerReport{}
	var db *sql.DB
	began := time.Now()
	for cut := 0; ; cut++ {
		// Every fsync takes a millisecond, as on a real disk: the window between
		// a commit and its sync is where an ack sent too early hides.
		fs := lazyfs.ServeForTest(t, backing, mnt, lazyfs.Options{SyncDelay: time.Millisecond})
		run := start(t, cfg.Env, runArgs...)
		js, closeConn := connectEmbedded(t, url, run)
		if cut > 0 {
			mu.Lock()
			acked := len(published)
			mu.Unlock()
			if missing := acked - streamMessages(t, js); missing > rep.StreamMissing {
				rep.StreamMissing = missing
			}
		}
		if cut == cfg.Cuts {
			defer closeConn()
			// The final run's mount stays up until the test ends: read through it.
			db = (&world{t: t, js: js, db: filepath.Join(mnt, "ledger.db")}).settled(3 * time.Minute)
			if !cfg.tolerate {
				// Whatever the publisher saw: every message the stream
				// holds, run acked, so it must be in the ledger.
				checkStreamApplied(t, js, db)
			}
			run.stop()
			if code := run.wait(time.Minute); code != 0 {
				t.Errorf("final run exited %d", code)
			}
			break
		}
		closeConn()
		// Publish in chunks until the cut; the moment is the experiment's
		// variable, not synchronisation.
		// Drawn before the publisher starts: it owns rng from then on.
		cutAfter := time.Duration(300+rng.IntN(1500)) * time.Millisecond
		stop := make(chan struct{})
		var current *proc
		pubDone := make(chan struct{})
		go func() {
			defer close(pubDone)
			for {
				select {
				case <-stop:
					return
				default:
				}
				evs := newChunk()
				p := startIn(t, eventLines(evs), nil, "publish", "--nats", url, "--subject", subject, "--id-field", "id", "--json",
					"--attempts", "1", "--timeout", "2s", "--log-level", "error")
				mu.Lock()
				current = p
				mu.Unlock()
				p.wait(time.Minute)
				acked := ackedIDs(p.output())
				mu.Lock()
				for _, e := range evs {
					if acked[e.ID] {
						published[e.ID] = e
					} else {
						uncertain[e.ID] = e
					}
				}
				current = nil
				mu.Unlock()
			}
		}()
		time.Sleep(cutAfter)
		close(stop)
		// A real power cut stops the disk and the CPUs at once: an fsync in
		// flight does not complete, and nothing runs after it. Cut, then
		// kill (a process killed first would see its fsync finish).
		if err := fs.PowerCut(); err != nil {
			t.Fatal(err)
		}
		run.kill()
		mu.Lock()
		if current != nil {
			current.kill()
		}
		mu.Unlock()
		<-pubDone
		rep.Cuts++
		t.Logf("power cut %d at %s: %d acked publishes so far", rep.Cuts, time.Since(began).Round(time.Millisecond), len(published))
	}
	rep.Seconds = time.Since(began).Seconds()
	var check testing.TB = t
	if cfg.tolerate {
		check = expectLoss{t}
	}
	if cfg.noWebhook {
		dest = nil
	}
	checkSoak(check, db, dest, published, uncertain, &rep.soakReport)
	out, _ := json.MarshalIndent(rep, "", "  ")
	t.Logf("power-cut report:\n%s", out)
	return rep
}

// connectEmbedded connects to run's embedded server once its stream exists.
func connectEmbedded(t *testing.T, url string, run *proc) (jetstream.JetStream, func()) {
	t.Helper()
	var nc *nats.Conn
	var js jetstream.JetStream
	consumertest.Eventually(t, time.Minute, "run's embedded server and stream", func() bool {
		select {
		case <-run.done:
			t.Fatalf("run exited while starting:\n%s", run.output())
		default:
		}
		c, err := nats.Connect(url, nats.Timeout(time.Second))
		if err != nil {
			return false
		}
		j, err := jetstream.New(c)
		if err == nil {
			if _, err = j.Consumer(context.Background(), stream, "jetledger"); err == nil {
				nc, js = c, j
				return true
			}
		}
		c.Close()
		return false
	})
	return js, nc.Close
}

// streamMessages is how many messages the stream holds.
func streamMessages(t *testing.T, js jetstream.JetStream) int {
	t.Helper()
	s, err := js.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	return int(s.CachedInfo().State.Msgs)
}

// eventLines is the events as JSON lines with their id in "id".
func eventLines(evs []event) []byte {
	var b bytes.Buffer
	for _, e := range evs {
		fmt.Fprintf(&b, "{\"id\":%q,\"account\":%q,\"amount\":%d}\n", e.ID, e.Account, e.Amount)
	}
	return b.Bytes()
}

// ackedIDs reads `jetledger publish --json` output: one ack per line.
func ackedIDs(out string) map[string]bool {
	acked := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader([]byte(out)))
	for sc.Scan() {
		var a struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(sc.Bytes(), &a) == nil && a.ID != "" {
			acked[a.ID] = true
		}
	}
	return acked
}

// checkPowerReport fails a default run that proved nothing or hid a loss:
// nothing acked, a dead letter (which the checker does not count as lost),
// or more uncertain publishes than the chunks a cut can stop.
func checkPowerReport(t *testing.T, rep powerReport) {
	t.Helper()
	switch {
	case rep.Published == 0:
		t.Fatal("nothing was published: the test proved nothing")
	case rep.DeadLetters != 0:
		t.Fatalf("%d dead letters: a message the cuts should not have touched", rep.DeadLetters)
	case rep.Uncertain > 2*publishChunk*rep.Cuts:
		t.Fatalf("%d uncertain publishes over %d cuts: more than the chunks the cuts stopped", rep.Uncertain, rep.Cuts)
	}
}

// The default settings: the embedded store syncs every write before its
// publish is acked, the ledger syncs every batch before its acks. Nothing
// acknowledged is lost, applied twice or sent twice across power cuts.
func TestPowerCuts(t *testing.T) {
	rep := runPowerCuts(t, powerCuts{Cuts: powerCutsFromEnv(3), Seed: 1})
	checkPowerReport(t, rep)
	if rep.SentTwice != 0 {
		t.Fatalf("%d power cuts: %d sent twice", rep.Cuts, rep.SentTwice)
	}
	if rep.Lost != 0 || rep.AppliedTwice != 0 || rep.SentTwice != 0 || rep.StreamMissing != 0 {
		t.Fatalf("%d power cuts: %d lost, %d applied twice, %d sent twice, %d acked publishes missing from the stream",
			rep.Cuts, rep.Lost, rep.AppliedTwice, rep.SentTwice, rep.StreamMissing)
	}
	if rep.Published == 0 {
		t.Fatal("nothing was published: the test proved nothing")
	}
}

// The same without effects: only run's pipelined batches write the ledger,
// so nothing but the WAL sync before each batch's acks (and the
// checkpoints, once the WAL fills) makes them durable. Without that sync this test loses
// acked events; with effects the outbox's own commits sync the WAL too
// often for a cut to find the gap.
func TestPowerCutsLedgerAlone(t *testing.T) {
	rep := runPowerCuts(t, powerCuts{Cuts: powerCutsFromEnv(3), Seed: 5, noWebhook: true})
	checkPowerReport(t, rep)
	if rep.Lost != 0 || rep.AppliedTwice != 0 || rep.StreamMissing != 0 {
		t.Fatalf("%d power cuts: %d lost, %d applied twice, %d acked publishes missing from the stream",
			rep.Cuts, rep.Lost, rep.AppliedTwice, rep.StreamMissing)
	}
}

// expectLoss is a testing.TB whose Error and Errorf only log: for the runs
// whose losses are the measurement, counted in the report.
type expectLoss struct{ testing.TB }

func (e expectLoss) Error(args ...any)                 { e.TB.Helper(); e.TB.Log(args...) }
func (e expectLoss) Errorf(format string, args ...any) { e.TB.Helper(); e.TB.Logf(format, args...) }

// The relaxed store, --sync-interval 2m: what a power cut costs, as the
// measured reason for the default. Acked publishes are lost.
func TestPowerCutsRelaxedSyncLosesAckedPublishes(t *testing.T) {
	rep := runPowerCuts(t, powerCuts{Cuts: powerCutsFromEnv(2), Seed: 2, Run: []string{"--sync-interval", "2m"}, tolerate: true, noWebhook: true})
	t.Logf("--sync-interval 2m: %d power cuts, %d acked publishes, %d missing from the stream after a cut, %d never applied, %d applied twice, %d sent twice",
		rep.Cuts, rep.Published, rep.StreamMissing, rep.Lost, rep.AppliedTwice, rep.SentTwice)
	if rep.StreamMissing+rep.Lost == 0 {
		t.Fatal("no acked publish was lost with the store synced every 2m: the test cannot see what the default prevents")
	}
}

// SQLite at synchronous=NORMAL (a test-only switch): commits acked before
// they are on disk. The power-cut test must catch the loss, or it proves
// nothing.
func TestPowerCutsCatchAWeakenedLedger(t *testing.T) {
	rep := runPowerCuts(t, powerCuts{Cuts: powerCutsFromEnv(3), Seed: 3, Env: []string{"JETLEDGER_FAULT_SQLITE_SYNCHRONOUS=NORMAL"}, tolerate: true})
	t.Logf("ledger at synchronous=NORMAL: %d power cuts, %d acked publishes, %d lost, %d applied twice, %d sent twice",
		rep.Cuts, rep.Published, rep.Lost, rep.AppliedTwice, rep.SentTwice)
	if rep.Lost+rep.AppliedTwice+rep.SentTwice == 0 {
		t.Fatal("the ledger ran at synchronous=NORMAL and the power cuts cost nothing: the test cannot catch a weakened ledger")
	}
}
