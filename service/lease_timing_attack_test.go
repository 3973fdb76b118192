package service

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/natsconn"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// Helper-18's attacks on the lease of plain runs (no changelog) restarted
// with new flags (another --deadline, so another lease TTL): the wait for a
// predecessor's key of another timing (service/leased.go takeLease) and
// the release of a clean stop (changelog/lease.go release).

// attackOpsPlain is a plain run of the test durable on srv with plan,
// logging to logw when given.
func attackOpsPlain(t *testing.T, srv *server.Server, plan ackwait.Plan, logw io.Writer) Config {
	t.Helper()
	cfg := testConfig(t, t.TempDir())
	cfg.NATS, cfg.Consumer.Plan = &natsconn.Config{URL: srv.ClientURL()}, plan
	if logw != nil {
		cfg.Logger = slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return cfg
}

// attackOpsStart runs cfg until stop is called; done has its outcome.
func attackOpsStart(t *testing.T, cfg Config) (stop context.CancelFunc, done chan error) {
	t.Helper()
	ctx, stop := context.WithCancel(t.Context())
	done = make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	return stop, done
}

// attackOpsWait waits for a run's outcome, at most d.
func attackOpsWait(t *testing.T, done chan error, d time.Duration, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("%s: still running after %s", what, d)
		return nil
	}
}

// attackOpsHolder reads the test durable's lease key: its holder, and
// whether there is one (no bucket, no key, or a delete marker: none).
func attackOpsHolder(t *testing.T, js jetstream.JetStream) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, changelog.LeaseBucket)
	if err != nil {
		return "", false
	}
	e, err := kv.Get(ctx, "S.d")
	if err != nil {
		return "", false
	}
	return string(e.Value()), true
}

// attackOpsAckWait is the durable's AckWait now.
func attackOpsAckWait(t *testing.T, js jetstream.JetStream) time.Duration {
	t.Helper()
	c, err := js.Consumer(t.Context(), "S", "d")
	if err != nil {
		t.Fatal(err)
	}
	return c.CachedInfo().Config.AckWait
}

// A run of new flags beside a live run of the durable (its key renewed)
// is refused once two of the holder's TTLs passed, naming both timings,
// and has consumed nothing; meanwhile the live run consumes on, keeps its
// durable's AckWait, and exits 0 on its stop.
func TestAttackARunOfNewFlagsBesideALiveRunIsRefusedAndTheLiveRunGoesOn(t *testing.T) {
	t.Parallel()
	srv, js, steady := attackOpsServer(t)
	a := attackOpsPlain(t, srv, steady, nil)
	stopA, doneA := attackOpsStart(t, a)
	defer stopA()
	publish(t, js, 0, 10)
	consumertest.Eventually(t, 2*time.Minute, "a commits 10", func() bool { return processed(t, a.DB) == 10 })
	ackWait := attackOpsAckWait(t, js)

	var logB consumertest.LogBuffer
	b := attackOpsPlain(t, srv, quickPlan, &logB)
	stopB, doneB := attackOpsStart(t, b)
	defer stopB()
	consumertest.Eventually(t, 2*time.Minute, "b waits for a's key", func() bool { return logB.Has("held by a run of another timing") })
	publish(t, js, 10, 30) // while b waits
	consumertest.Eventually(t, 2*time.Minute, "a commits 30 while b waits", func() bool { return processed(t, a.DB) == 30 })
	errB := attackOpsWait(t, doneB, 3*time.Minute, "the run of new flags beside a live run")
	var te *changelog.TimingError
	if !errors.As(errB, &te) || te.HolderTTL != LeaseTTL(steady.WithDefaults().AckWait()) {
		t.Fatalf("the run of new flags beside a live run: %v, want a TimingError naming the live run's TTL", errB)
	}
	t.Logf("b refused: %v", errB)
	if n := processed(t, b.DB); n != 0 {
		t.Fatalf("the refused run committed %d messages", n)
	}
	if got := attackOpsAckWait(t, js); got != ackWait {
		t.Fatalf("the durable's AckWait is %s after the refused run, was %s", got, ackWait)
	}
	publish(t, js, 30, 40)
	consumertest.Eventually(t, 2*time.Minute, "a commits 40 after b's refusal", func() bool { return processed(t, a.DB) == 40 })
	stopA()
	if err := attackOpsWait(t, doneA, 2*time.Minute, "the live run"); err != nil {
		t.Fatalf("the live run's stop: %v, want nil", err)
	}
}

// Two plain runs of one durable, of other flags, started at the same
// moment: one consumes every message, the other is refused (ErrOwned or
// the TimingError) having committed nothing, and the one that consumed
// exits 0 on its stop.
func TestAttackTwoPlainRunsOfOtherFlagsStartedTogether(t *testing.T) {
	t.Parallel()
	srv, js, steady := attackOpsServer(t)
	cfgs := []Config{attackOpsPlain(t, srv, steady, nil), attackOpsPlain(t, srv, quickPlan, nil)}
	go1 := make(chan struct{})
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	type outcome struct {
		i   int
		err error
	}
	done := make(chan outcome, 2)
	for i, cfg := range cfgs {
		go func() {
			<-go1
			done <- outcome{i, Run(ctx, cfg)}
		}()
	}
	close(go1)
	var first outcome
	select {
	case first = <-done:
	case <-time.After(3 * time.Minute):
		t.Fatal("neither run was refused in 3 minutes: both consume the durable?")
	}
	var te *changelog.TimingError
	if !errors.Is(first.err, ErrOwned) && !errors.As(first.err, &te) {
		t.Fatalf("run %d ended first with %v, want a refusal (ErrOwned or TimingError)", first.i, first.err)
	}
	t.Logf("run %d refused: %v", first.i, first.err)
	loser, winner := cfgs[first.i], cfgs[1-first.i]
	publish(t, js, 0, 30)
	consumertest.Eventually(t, 2*time.Minute, "the other run commits 30", func() bool { return processed(t, winner.DB) == 30 })
	if n := processed(t, loser.DB); n != 0 {
		t.Fatalf("the refused run committed %d", n)
	}
	stop()
	select {
	case o := <-done:
		if o.err != nil {
			t.Fatalf("the consuming run's stop: %v, want nil", o.err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the consuming run did not stop")
	}
}

// A clean stop (SIGTERM) frees the key at once: a run of new flags
// started right after it finds no key of another timing to wait for.
func TestAttackACleanStopFreesTheKeyForARunOfNewFlags(t *testing.T) {
	t.Parallel()
	srv, js, steady := attackOpsServer(t)
	a := attackOpsPlain(t, srv, steady, nil)
	stopA, doneA := attackOpsStart(t, a)
	defer stopA()
	publish(t, js, 0, 10)
	consumertest.Eventually(t, 2*time.Minute, "a commits 10", func() bool { return processed(t, a.DB) == 10 })
	if h, ok := attackOpsHolder(t, js); !ok {
		t.Fatalf("no key while a runs (%q)", h)
	}
	stopA()
	if err := attackOpsWait(t, doneA, 2*time.Minute, "a's stop"); err != nil {
		t.Fatalf("a's stop: %v", err)
	}
	if h, ok := attackOpsHolder(t, js); ok {
		t.Fatalf("after a's clean stop its key still names %q", h)
	}
	var logB consumertest.LogBuffer
	b := attackOpsPlain(t, srv, quickPlan, &logB)
	stopB, doneB := attackOpsStart(t, b)
	defer stopB()
	publish(t, js, 10, 20)
	consumertest.Eventually(t, 2*time.Minute, "b commits the 10 after a's", func() bool { return processed(t, b.DB) == 10 })
	if logB.Has("held by a run of another timing") || logB.Has("lease is held") {
		t.Fatalf("b waited for a key a's clean stop should have freed:\n%s", logB.String())
	}
	stopB()
	if err := attackOpsWait(t, doneB, 2*time.Minute, "b's stop"); err != nil {
		t.Fatalf("b's stop: %v", err)
	}
}

// The lease key, or the whole lease bucket, goes (an operator's delete)
// under a live plain run while a run of new flags waits for that key: at
// most one of them may consume the durable. Either the waiting run is
// still refused, or, if it takes the key, the live run must stop
// consuming (ErrOwned) within a renewal or two, as it does when a run of
// its own timing takes it.
func TestAttackLeaseGoneUnderALiveRunWhileARunOfNewFlagsWaits(t *testing.T) {
	t.Parallel()
	for _, gone := range []string{"key", "bucket"} {
		t.Run(gone, func(t *testing.T) {
			t.Parallel()
			srv := consumertest.RunServer(t)
			_, js := consumertest.Connect(t, srv)
			// a renews every quarter of a TTL of about 14s; b looks every
			// quarter of about 3s: after the delete, b looks first.
			slow := quickPlan
			slow.Deadline = 12 * time.Second
			ttlA := LeaseTTL(slow.WithDefaults().AckWait())
			a := attackOpsPlain(t, srv, slow, nil)
			stopA, doneA := attackOpsStart(t, a)
			defer stopA()
			publish(t, js, 0, 10)
			consumertest.Eventually(t, 2*time.Minute, "a commits 10", func() bool { return processed(t, a.DB) == 10 })
			holderA, ok := attackOpsHolder(t, js)
			if !ok {
				t.Fatal("no key while a runs")
			}

			var logB consumertest.LogBuffer
			b := attackOpsPlain(t, srv, quickPlan, &logB)
			stopB, doneB := attackOpsStart(t, b)
			defer stopB()
			consumertest.Eventually(t, 2*time.Minute, "b waits for a's key", func() bool { return logB.Has("held by a run of another timing") })

			// Right after one of a's renewals.
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			kv, err := js.KeyValue(ctx, changelog.LeaseBucket)
			if err != nil {
				t.Fatal(err)
			}
			w, err := kv.Watch(ctx, "S.d", jetstream.UpdatesOnly())
			if err != nil {
				t.Fatal(err)
			}
			for e := range w.Updates() {
				if e != nil {
					break
				}
			}
			w.Stop() //nolint:errcheck // done watching
			switch gone {
			case "key":
				err = kv.Delete(ctx, "S.d")
			case "bucket":
				err = js.DeleteKeyValue(ctx, changelog.LeaseBucket)
			}
			if err != nil {
				t.Fatal(err)
			}

			var bEnded bool
			var errB error
			consumertest.Eventually(t, 3*time.Minute, "b refused, or b holding the key", func() bool {
				select {
				case errB = <-doneB:
					bEnded = true
					return true
				default:
				}
				h, ok := attackOpsHolder(t, js)
				return ok && h != "" && h != holderA
			})
			if bEnded {
				t.Logf("b ended: %v", errB)
				var te *changelog.TimingError
				if !errors.As(errB, &te) && !errors.Is(errB, ErrOwned) {
					t.Fatalf("b ended with %v, want a refusal", errB)
				}
				publish(t, js, 10, 20)
				consumertest.Eventually(t, 2*time.Minute, "a consumes on", func() bool { return processed(t, a.DB) == 20 })
				stopA()
				if err := attackOpsWait(t, doneA, 2*time.Minute, "a's stop"); err != nil {
					t.Fatalf("a's stop: %v", err)
				}
				return
			}
			holderB, _ := attackOpsHolder(t, js)
			t.Logf("b took the key (%s) from the live a (%s) after the %s was deleted", holderB, holderA, gone)
			aBefore := processed(t, a.DB)
			publish(t, js, 10, 40)
			// a must find out at its next renewal (a quarter TTL) and stop.
			var errA error
			select {
			case errA = <-doneA:
			case <-time.After(2*ttlA + 30*time.Second):
				consumertest.Eventually(t, 2*time.Minute, "the 30 new messages committed somewhere", func() bool {
					return processed(t, a.DB)+processed(t, b.DB) >= 40
				})
				na, nb := processed(t, a.DB), processed(t, b.DB)
				t.Logf("b's log:\n%s", tail(logB.String(), 3000))
				t.Fatalf("b of new flags holds the durable's lease (%s) and consumes (%d committed), yet a, whose key it took, has not stopped %s later and committed %d more (%d before): two runs consume one durable on two ledgers",
					holderB, nb, 2*ttlA+30*time.Second, na-aBefore, aBefore)
			}
			if !errors.Is(errA, ErrOwned) {
				t.Fatalf("a stopped with %v, want ErrOwned", errA)
			}
			t.Logf("a stopped: %v", errA)
			consumertest.Eventually(t, 2*time.Minute, "b commits the rest", func() bool {
				return processed(t, a.DB)+processed(t, b.DB) >= 40
			})
			stopB()
			// context.Canceled: stopped while it started (the command says
			// "stopped while starting" and exits 0).
			if err := attackOpsWait(t, doneB, 2*time.Minute, "b's stop"); err != nil && !errors.Is(err, context.Canceled) {
				t.Fatalf("b's stop: %v", err)
			}
		})
	}
}

// An owned partition (--changelog --standby) whose second host is given
// another --deadline is refused at once (no wait of two TTLs), naming
// both timings; the owner consumes on and exits 0.
func TestAttackAnOwnedPartitionsHostOfAnotherDeadlineIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	srv, js, steady := attackOpsServer(t)
	ttlA := LeaseTTL(steady.WithDefaults().AckWait())
	a := attackOpsPlain(t, srv, steady, nil)
	a.Owner = &Owner{Name: "a", Standby: true}
	stopA, doneA := attackOpsStart(t, a)
	defer stopA()
	publish(t, js, 0, 10)
	consumertest.Eventually(t, 2*time.Minute, "a owns and commits 10", func() bool { return processed(t, a.DB) == 10 })

	b := attackOpsPlain(t, srv, quickPlan, nil)
	b.Owner = &Owner{Name: "b", Standby: true}
	began := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	errB := Run(ctx, b)
	took := time.Since(began)
	var te *changelog.TimingError
	if !errors.As(errB, &te) {
		t.Fatalf("an owned host of another deadline: %v (after %s), want a TimingError", errB, took)
	}
	t.Logf("b refused after %s: %v", took, errB)
	if took > 2*ttlA {
		t.Errorf("an owned host of another deadline was refused after %s, not at once (2 TTLs: %s)", took, 2*ttlA)
	}
	publish(t, js, 10, 20)
	consumertest.Eventually(t, 2*time.Minute, "a commits 20", func() bool { return processed(t, a.DB) == 20 })
	stopA()
	if err := attackOpsWait(t, doneA, 2*time.Minute, "a's stop"); err != nil {
		t.Fatalf("a's stop: %v", err)
	}
}

// attackOpsServer is a server of the test's own, a client of it, and a
// plan whose lease (about 5.7s) a loaded host keeps through a renewal.
func attackOpsServer(t *testing.T) (*server.Server, jetstream.JetStream, ackwait.Plan) {
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	steady := quickPlan
	steady.Deadline = 3 * time.Second
	return srv, js, steady
}
