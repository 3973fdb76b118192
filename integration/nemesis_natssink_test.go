package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/natssink"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
	"github.com/nats-io/nats.go/jetstream"
)

// The natssink topology: run --nats to a nats-server process, as external,
// but run's effects go through the NATS sink (--effects-subject) into an
// effects stream on the same server instead of the webhook. The
// destination the checker reads is every message ever stored in the
// effects stream: the live instance's, and those of each instance deleted
// or purged meanwhile, read just before they went (a deleted stream's
// messages are lost to a reader, but they were sent). "Sent twice" is one
// outbox row's id stored more than once, across instances too.
const (
	topoNATSSink   = "natssink"
	nemEffStream   = "EFFECTS"
	nemEffSubject  = "effects.nem"
	nemEffTimeout  = time.Second // --effects-timeout: a held send becomes an unknown outcome quickly
	nemEffShortWin = time.Second // a window shorter than the outbox's horizon: unknown outcomes go to review
)

// Steps only this topology takes.
const (
	nemRecreate   nemKind = "recreate"   // delete and re-create the effects stream, same config: idle (Arg 0), with sends in flight (1), right after a broker kill mid-send (2)
	nemEffPurge   nemKind = "effpurge"   // purge the effects stream
	nemBrokerSend nemKind = "brokersend" // SIGKILL and restart of nats-server while Arg events are applied and their effects sent
	nemReviewList nemKind = "review"     // outbox review --json lists the rows in review
)

// nemSinkState is what the natssink topology keeps beside its world.
type nemSinkState struct {
	mu   sync.Mutex
	kept []webhooktest.StoredItem // messages of instances deleted, or purged from one, read before they went
}

var (
	nemSinksMu sync.Mutex
	nemSinks   = map[*nemWorld]*nemSinkState{}
)

func nemSinkOf(w *nemWorld) *nemSinkState {
	nemSinksMu.Lock()
	defer nemSinksMu.Unlock()
	return nemSinks[w]
}

func init() {
	nemTopologies[topoNATSSink] = &nemTopology{
		setup: func(w *nemWorld) {
			s := &nemSinkState{}
			nemSinksMu.Lock()
			nemSinks[w] = s
			nemSinksMu.Unlock()
			w.t.Cleanup(func() { nemSinksMu.Lock(); delete(nemSinks, w); nemSinksMu.Unlock() })
			w.b = &broker{t: w.t, bin: natsServerBinary(w.t), dir: filepath.Join(w.dir, "nats"), port: freePort(w.t)}
			w.b.start()
			w.js = connectTo(w.t, w.b.url())
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := w.js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{"ev.>"}, Duplicates: nemDupWindow}); err != nil {
				w.t.Fatal(err)
			}
			// Half the seeds make the effects stream with a window shorter
			// than the outbox's horizon, so unknown outcomes go to review
			// and are looked up; the others let run make it (--effects-stream,
			// a window long enough to re-send with the same id).
			if w.rng.IntN(2) == 0 {
				if _, err := w.js.CreateStream(ctx, jetstream.StreamConfig{Name: nemEffStream, Subjects: []string{nemEffSubject},
					Storage: jetstream.FileStorage, Duplicates: nemEffShortWin}); err != nil {
					w.t.Fatal(err)
				}
				w.t.Logf("natssink: effects stream with a %s duplicate window", nemEffShortWin)
			}
			w.startRun(nil)
		},
		url:     func(w *nemWorld) string { return w.b.url() },
		runArgs: func(w *nemWorld, _ string) []string { return []string{"--nats", w.b.url()} },
		sinkArgs: func(*nemWorld) []string {
			return []string{"--effects-subject", nemEffSubject, "--effects-stream", nemEffStream, "--effects-timeout", nemEffTimeout.String()}
		},
		items: func(w *nemWorld) []webhooktest.StoredItem {
			s := nemSinkOf(w)
			live, _ := w.readEffects()
			s.mu.Lock()
			defer s.mu.Unlock()
			return append(append([]webhooktest.StoredItem{}, s.kept...), live...)
		},
		steps: map[nemKind]func(*nemWorld, nemStep){
			nemMidSend: (*nemWorld).sinkMidSend,
			nemHang:    (*nemWorld).sinkHang,
			nemCancel:  (*nemWorld).sinkCancel,
			nemReplay:  (*nemWorld).sinkReplay,
		},
		// A stream stores or refuses: nothing stores and then answers an
		// error, as d500's destination does.
		without: map[nemKind]bool{nem500: true},
		// external's steps (this file's init may run before its), and this one's.
		extra: []nemWeight{{nemPause, 2, nil}, {nemBroker, 3, nil}, {nemStop, 3, nil}, {nemStart, 2, nil}, {nemHandover, 2, nil},
			{nemRecreate, 4, between(0, 2)}, {nemEffPurge, 2, nil}, {nemBrokerSend, 3, between(10, 40)}, {nemReviewList, 2, nil}},
	}
	nemStepFuncs[nemRecreate] = (*nemWorld).sinkRecreate
	nemStepFuncs[nemEffPurge] = func(w *nemWorld, _ nemStep) { w.sinkPurge() }
	nemStepFuncs[nemBrokerSend] = (*nemWorld).sinkBrokerSend
	nemStepFuncs[nemReviewList] = func(w *nemWorld, _ nemStep) { w.sinkReview() }
}

// readEffects reads every message of the live effects stream, as a reader
// of it would (by Nats-Msg-Id, the outbox row id), and the last sequence
// read; none while the stream does not exist (between a delete and its
// re-creation nothing can be read, and what was is kept).
func (w *nemWorld) readEffects() ([]webhooktest.StoredItem, uint64) {
	var items []webhooktest.StoredItem
	var last uint64
	consumertest.Eventually(w.t, time.Minute, "the effects stream read", func() bool {
		items, last = nil, 0
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := w.js.Stream(ctx, nemEffStream)
		if err != nil {
			return false
		}
		info := s.CachedInfo()
		if info.State.Msgs == 0 {
			return true
		}
		oc, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{HeadersOnly: true})
		if err != nil {
			return false
		}
		for {
			batch, err := oc.FetchNoWait(256)
			if err != nil {
				return false
			}
			n, end := 0, false
			for m := range batch.Messages() {
				n++
				md, err := m.Metadata()
				if err != nil {
					continue
				}
				items = append(items, webhooktest.StoredItem{Key: m.Headers().Get(jetstream.MsgIDHeader),
					MessageID: m.Headers().Get(natssink.HeaderMessageID), ExternalID: nemEffStream + ":" + strconv.FormatUint(md.Sequence.Stream, 10)})
				last = md.Sequence.Stream
				end = end || md.Sequence.Stream >= info.State.LastSeq || md.NumPending == 0
			}
			if batch.Error() != nil {
				return false
			}
			if end || n == 0 {
				return last >= info.State.LastSeq
			}
		}
	})
	return items, last
}

// sinkRecreate deletes the effects stream and makes it again with the same
// name, subject and window: issue 19's hole #1, a row in review must not be
// sent into the new instance unless it provably never reached the old one.
// The stream is sealed first, so that what the reader keeps is all the old
// instance stored (the reader's need: a send refused by a sealed stream is
// refused as by a deleted one).
func (w *nemWorld) sinkRecreate(st nemStep) {
	w.up()
	var done <-chan struct{}
	switch st.Arg {
	case 1:
		done = w.publishFreshAsync(20)
		time.Sleep(time.Duration(w.rng.IntN(300)) * time.Millisecond) // when, in the sends, the stream goes: the experiment's variable
	case 2:
		done = w.publishFreshAsync(20)
		time.Sleep(time.Duration(w.rng.IntN(300)) * time.Millisecond) // the moment of the kill, as in brokersend
		w.b.p.kill()
		w.b.start()
	}
	var cfg jetstream.StreamConfig
	consumertest.Eventually(w.t, time.Minute, "the effects stream sealed", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := w.js.Stream(ctx, nemEffStream)
		if err != nil {
			return false
		}
		cfg = s.CachedInfo().Config
		if cfg.Sealed {
			return true // sealed by a try whose answer was lost
		}
		sealed := cfg
		sealed.Sealed = true
		_, err = w.js.UpdateStream(ctx, sealed)
		return err == nil
	})
	cfg.Sealed = false
	items, _ := w.readEffects()
	s := nemSinkOf(w)
	s.mu.Lock()
	s.kept = append(s.kept, items...)
	s.mu.Unlock()
	consumertest.Eventually(w.t, time.Minute, "the effects stream deleted and made again", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := w.js.DeleteStream(ctx, nemEffStream); err != nil && !strings.Contains(err.Error(), "not found") {
			return false
		}
		_, err := w.js.CreateStream(ctx, cfg)
		return err == nil
	})
	w.t.Logf("recreate: the effects stream's old instance held %d messages", len(items))
	if done != nil {
		<-done
	}
}

// sinkPurge purges the effects stream up to what was read, so the reader
// keeps every message the purge takes.
func (w *nemWorld) sinkPurge() {
	items, last := w.readEffects()
	if last == 0 {
		w.stats.NoTarget[string(nemEffPurge)]++
		return
	}
	s := nemSinkOf(w)
	s.mu.Lock()
	s.kept = append(s.kept, items...)
	s.mu.Unlock()
	consumertest.Eventually(w.t, time.Minute, "the effects stream purged", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := w.js.Stream(ctx, nemEffStream)
		return err == nil && st.Purge(ctx, jetstream.WithPurgeSequence(last+1)) == nil
	})
}

// sinkBrokerSend kills nats-server while events arrive and their effects
// are sent: sends in flight have unknown outcomes (re-sent with the same id
// inside a long window, review under a short one).
func (w *nemWorld) sinkBrokerSend(st nemStep) {
	w.up()
	done := w.publishFreshAsync(max(st.Arg, 1))
	time.Sleep(time.Duration(50+w.rng.IntN(400)) * time.Millisecond) // the moment of the kill: the experiment's variable
	w.b.p.kill()
	time.Sleep(time.Duration(w.rng.IntN(1500)) * time.Millisecond) // how long it stays down: the experiment's variable
	w.b.start()
	<-done
}

// brokerAnswers waits until nats-server answers again after a SIGCONT, so
// whatever it held in its sockets has been read.
func (w *nemWorld) brokerAnswers() {
	consumertest.Eventually(w.t, time.Minute, "nats-server answering", func() bool {
		_, err := w.streamInfo()
		return err == nil
	})
}

// sinkHang is hang's meaning here: the server stops answering (SIGSTOP)
// past the sink's timeout while sends are in flight, then goes on; what it
// had read of a send by then it stores after the timeout.
func (w *nemWorld) sinkHang(nemStep) {
	w.up()
	done := w.publishFreshAsync(15)
	time.Sleep(time.Duration(50+w.rng.IntN(300)) * time.Millisecond) // when, in the traffic, it hangs: the experiment's variable
	w.b.p.signal(syscall.SIGSTOP)
	time.Sleep(nemEffTimeout + time.Duration(w.rng.IntN(1500))*time.Millisecond) // past the sink's timeout: the experiment
	w.b.p.signal(syscall.SIGCONT)
	w.brokerAnswers()
	<-done
}

// sinkMidSend is midsend's meaning here: run dies while a send is in
// flight. The server is stopped while sends go, so a claimed send waits on
// it; run is killed while a row is sending, and the server, going on,
// stores what it had read: landed, with nobody to write it back.
func (w *nemWorld) sinkMidSend(nemStep) {
	w.up()
	done := w.publishFreshAsync(15)
	time.Sleep(time.Duration(50+w.rng.IntN(300)) * time.Millisecond) // when, in the traffic: the experiment's variable
	w.b.p.signal(syscall.SIGSTOP)
	// Before the sink's timeout ends the held send.
	caught := poll(nemEffTimeout/2, func() bool { return len(w.rowsIn("sending")) > 0 })
	w.run.kill()
	w.b.p.signal(syscall.SIGCONT)
	w.brokerAnswers()
	if !caught {
		w.t.Logf("midsend: no row was sending when run was killed")
	}
	w.startRun(nil)
	<-done
}

// sinkCancel: cancelling a row already sent fails, a published message may
// already be consumed (README); exit 1 is the refusal. Exit 0 would count it
// cancelled, and the checker finds its message still stored.
func (w *nemWorld) sinkCancel(nemStep) {
	rows := w.rowsIn("sent")
	j := pick(w.rng.IntN(1000), len(rows))
	if j < 0 {
		w.stats.NoTarget["cancel"]++
		return
	}
	r := rows[j]
	if w.operator(nemCancel, true, "outbox", "cancel", r.ID, "--db", r.db) {
		w.m.mu.Lock()
		w.m.cancelled[r.ID] = true
		w.m.mu.Unlock()
	}
}

// sinkReplay is replay with run's sink as the README lets an operator give
// it: replay takes --webhook or --no-effects, neither of which is a NATS
// sink, so it is given none. Up to run's ack floor that needs none; past it
// (or reaching a dead letter) it refuses with exit 2 asking for --webhook,
// counted: a NATS-sink run's effects cannot be recorded by a replay.
func (w *nemWorld) sinkReplay(st nemStep) {
	if st.Arg == 2 {
		w.stopRun()
		w.publishFresh(10)
	}
	args := []string{"replay", "--nats", w.url(), "--db", w.db, "--stream", stream, "--schema", w.schema, "--apply", balanceApply,
		"--json", "--log-level", "warn", "--deadline", w.deadline.String(), "--buffer-wait", "200ms",
		"--commit-margin", "300ms", "--ack-margin", "200ms"}
	if st.Arg == 1 {
		args = append(args, "--to-seq", strconv.FormatUint(w.stream().LastSeq, 10))
	}
	code, out := w.cli(args...)
	switch {
	case code == 0:
	case code == 2 && strings.Contains(out, "give it run's --webhook"):
		w.stats.Refused["replay-natssink"]++
		w.t.Logf("replay refused (exit 2): %s", lastLine(out))
	default:
		w.m.violate("replay: jetledger replay exited %d: %s", code, lastLine(out))
	}
}

// sinkReview runs outbox review --json: it must list the rows in review, as
// the ledger holds them before and after (run's lookups move rows meanwhile).
func (w *nemWorld) sinkReview() {
	before := map[string]bool{}
	for _, r := range w.rowsIn("review") {
		before[r.ID] = true
	}
	code, out := w.cli("outbox", "review", "--json", "--db", w.db)
	after := map[string]bool{}
	for _, r := range w.rowsIn("review") {
		after[r.ID] = true
	}
	if code != 0 {
		w.m.violate("review: jetledger outbox review exited %d: %s", code, lastLine(out))
		return
	}
	var listed []struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	i := strings.Index(out, "[")
	if i < 0 || json.NewDecoder(strings.NewReader(out[i:])).Decode(&listed) != nil {
		w.m.violate("review: outbox review --json printed no JSON list: %s", lastLine(out))
		return
	}
	got := map[string]bool{}
	for _, r := range listed {
		got[r.ID] = true
		if r.Status != "review" || (!before[r.ID] && !after[r.ID]) {
			w.m.violate("review: outbox review lists row %s (%s), not in review before or after", r.ID, r.Status)
		}
	}
	for id := range before {
		if after[id] && !got[id] {
			w.m.violate("review: row %s is in review but outbox review does not list it", id)
		}
	}
	if len(listed) == 0 {
		w.stats.NoTarget[string(nemReviewList)]++
	}
	w.t.Logf("review: %s", fmt.Sprint(len(listed), " rows in review"))
}
