package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/integration/lazyfs"
	"github.com/nats-io/nats.go/jetstream"
)

// The nemesis's faults beyond a process's death: the network between run
// and its server, the ledger's clock, the stream deleted and made again,
// and a power cut of the host's disk.

// topoPowerCut is the embedded topology with the ledger and the embedded
// server's store on lazyfs, so a step can cut the power: what was not
// synced is lost, and the host dies at once.
const topoPowerCut = "powercut"

// topoIdempotent is the external topology with a destination that honours
// Idempotency-Key: an unknown outcome is re-sent with the same key
// (ExpireRequeue, maybe_sent kept), not put in review, so the checker sees
// the re-send path: one item per key, and a row that may be at the
// destination never failed or cancelled while its item is there.
const topoIdempotent = "idempotent"

func init() {
	nemStepFuncs[nemRecreate] = func(w *nemWorld, _ nemStep) { w.recreate() }
	nemStepFuncs[nemClock] = (*nemWorld).clockJump
	nemStepFuncs[nemNet] = (*nemWorld).netFault
	nemStepFuncs[nemPowerCut] = func(w *nemWorld, _ nemStep) { w.powerCut() }

	// The embedded topology's, looked up when called: init functions of
	// other files may not have run yet.
	embedded := func() *nemTopology { return nemTopologies[topoEmbedded] }
	external := func() *nemTopology { return nemTopologies[topoExternal] }
	nemTopologies[topoIdempotent] = &nemTopology{
		setup:      func(w *nemWorld) { external().setup(w) },
		url:        func(w *nemWorld) string { return external().url(w) },
		runArgs:    func(w *nemWorld, db string) []string { return external().runArgs(w, db) },
		extra:      nemExternalSteps,
		idempotent: true,
	}
	nemTopologies[topoPowerCut] = &nemTopology{
		setup: func(w *nemWorld) {
			w.backing, w.mnt = filepath.Join(w.dir, "backing"), filepath.Join(w.dir, "mnt")
			for _, d := range []string{w.backing, w.mnt} {
				if err := os.MkdirAll(d, 0o700); err != nil {
					w.t.Fatal(err)
				}
			}
			w.mountDisk()
			w.db = filepath.Join(w.mnt, "ledger.db")
			embedded().setup(w)
		},
		url:     func(w *nemWorld) string { return embedded().url(w) },
		runArgs: func(w *nemWorld, db string) []string { return embedded().runArgs(w, db) },
		extra:   []nemWeight{{nemPowerCut, 4, nil}},
	}
}

// mountDisk serves the lazyfs disk; every fsync takes a millisecond, as on
// a real disk, widening the window between a commit and its sync.
func (w *nemWorld) mountDisk() {
	w.fs = lazyfs.ServeForTest(w.t, w.backing, w.mnt, lazyfs.Options{SyncDelay: time.Millisecond})
}

// powerCut cuts the power while traffic arrives: the disk drops what was
// not synced, then the host's processes die (a real cut stops both at
// once: cut first, or a killed process would see its fsync finish). What
// the stream acked must still be there, and applied once.
func (w *nemWorld) powerCut() {
	if w.fs == nil {
		w.t.Fatalf("powercut: the %s topology has no lazyfs disk", w.topo)
	}
	w.up()
	done := w.publishFreshAsync(10 + w.rng.IntN(20))
	time.Sleep(time.Duration(100+w.rng.IntN(500)) * time.Millisecond) // the moment of the cut is the experiment's variable
	if err := w.fs.PowerCut(); err != nil {
		w.t.Fatal(err)
	}
	w.run.kill()
	w.mountDisk()
	w.startRun(nil)
	<-done
}

// clockJump moves run's ledger clock (JETLEDGER_FAULT_CLOCK_FILE, read by
// the running process every 50ms): back or ahead by seconds past a
// retention or a lease, or by hours, or back to the host's time. Prunes,
// leases and the outbox's timers must hold whatever the ledger's clock
// says: their guards are the stream's state and the rows' own claims.
func (w *nemWorld) clockJump(st nemStep) {
	offset := []string{"-2h", "-90s", "0s", "90s", "2h"}[st.Arg%5]
	if err := os.WriteFile(w.clockFile, []byte(offset), 0o600); err != nil {
		w.t.Fatal(err)
	}
	w.t.Logf("clock: run's ledger clock is now %s off", offset)
	w.up()
	w.publishFresh(5)
}

// netFault breaks the connection between run and its server (the
// external topology's proxy) while traffic goes on: every connection
// reset (Arg 0), run's traffic held past AckWait so its acks arrive late
// and its messages are redelivered meanwhile (1), or both ways held (2).
// run must ride each out.
func (w *nemWorld) netFault(st nemStep) {
	if w.proxy == nil {
		w.t.Fatalf("net: the %s topology has no proxy", w.topo)
	}
	w.up()
	done := w.publishFreshAsync(10 + w.rng.IntN(20))
	time.Sleep(time.Duration(w.rng.IntN(300)) * time.Millisecond) // the moment of the fault is the experiment's variable
	switch st.Arg % 3 {
	case 0:
		for range 1 + w.rng.IntN(3) {
			w.proxy.Reset()
			time.Sleep(time.Duration(100+w.rng.IntN(400)) * time.Millisecond) // between resets: the experiment's variable
		}
	case 1:
		w.proxy.hold(false)
		time.Sleep(w.ackWait() + time.Duration(w.rng.IntN(1000))*time.Millisecond) // past AckWait: the fault is its length
		w.proxy.release()
	case 2:
		w.proxy.hold(true)
		time.Sleep(time.Duration(500+w.rng.IntN(3000)) * time.Millisecond) // the partition's length is the experiment's variable
		w.proxy.release()
	}
	<-done
	select {
	case <-w.run.done:
		w.m.violate("net: run exited %d during a network fault, want it to ride it out: %s", w.run.wait(0), tail(w.run.output()))
		w.down = true
	default:
	}
}

// recreate deletes the stream under run, as an operator may, and makes it
// again with the same configuration: run's durable goes with it and run
// stops (exit 1, naming it); the next run starts on the new stream from
// its first message. What the old stream held and run had not handled is
// gone by the schedule's doing; what run applied stays applied, and an id
// published again into the new stream is a duplicate, not a new message.
func (w *nemWorld) recreate() {
	w.up()
	cfg := w.streamConfig()
	// What the durable acked before the delete, run handled: its
	// conflicts and id-less messages must be recorded.
	handled := w.handledFloor()
	consumertest.Eventually(w.t, time.Minute, "the stream deleted", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		err := w.js.DeleteStream(ctx, stream)
		return err == nil || errors.Is(err, jetstream.ErrStreamNotFound)
	})
	if code := w.run.wait(time.Minute); code != 1 {
		w.m.violate("recreate: run exited %d once its stream was deleted, want 1: %s", code, tail(w.run.output()))
	}
	stopped := lastLine(w.run.output())
	w.down = true
	w.forgetInstance(handled)
	if w.b != nil { // a server of its own: the operator makes the stream again
		consumertest.Eventually(w.t, time.Minute, "the stream made again", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			_, err := w.js.CreateStream(ctx, cfg)
			return err == nil || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse)
		})
	}
	// The embedded topology's run makes it again itself.
	w.startRun(nil)
	info := w.streamCreated()
	w.t.Logf("recreate: the stream was made again at %s; the old run stopped with: %s", info.Format(time.RFC3339Nano), stopped)
}

// streamCreated is the creation time of the stream: which instance it is.
func (w *nemWorld) streamCreated() time.Time {
	var at time.Time
	consumertest.Eventually(w.t, 30*time.Second, "stream info", func() bool {
		info, err := w.streamInfo()
		if err == nil {
			at = info.Created
		}
		return err == nil
	})
	return at
}

// streamConfig reads the stream's configuration, riding out a restart.
func (w *nemWorld) streamConfig() jetstream.StreamConfig {
	var cfg jetstream.StreamConfig
	consumertest.Eventually(w.t, 30*time.Second, "stream config", func() bool {
		info, err := w.streamInfo()
		if err == nil {
			cfg = info.Config
		}
		return err == nil
	})
	return cfg
}

// forgetInstance settles the model's view of a deleted stream: its copies
// not handled are gone, its conflicts and messages without an id are
// judged now (recorded, or never delivered), and its sequences are
// forgotten, since the new stream counts from 1 again.
func (w *nemWorld) forgetInstance(handled uint64) {
	snap := w.snapshot()
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	for id, seqs := range w.m.copies {
		if !snap.applied[id] && !snap.deadIDs[id] && slices.ContainsFunc(seqs, func(s uint64) bool { return s > handled }) {
			w.m.gone[id] = true
		}
	}
	for id := range w.m.copies {
		w.m.copies[id] = nil
	}
	// A conflict or an id-less message the old stream held is either
	// recorded already or gone with it; the checker cannot tell a copy of
	// the old stream from one of the new by sequence, so they leave its
	// lists here.
	for id, seqs := range w.m.conflicts {
		for _, s := range seqs {
			if !snap.conflicts[s] && !w.m.goneSeq[s] && w.m.epochs[id] == 0 && s <= handled {
				w.m.violations = append(w.m.violations, fmt.Sprintf(
					"conflict not recorded: %s at seq %d of the deleted stream has another payload (acked by run: floor %d)", id, s, handled))
			}
		}
		delete(w.m.conflicts, id)
	}
	for _, s := range w.m.noID {
		if !snap.deadSeqs[s] && !w.m.discSeq[s] && !w.m.goneSeq[s] && s <= handled {
			w.m.violations = append(w.m.violations, fmt.Sprintf(
				"a message without Nats-Msg-Id at seq %d of the deleted stream was not dead-lettered (acked by run: floor %d)", s, handled))
		}
	}
	w.m.noID = nil
	// Sequence-keyed marks of the old stream mean nothing in the new one.
	clear(w.m.goneSeq)
	clear(w.m.discSeq)
}
