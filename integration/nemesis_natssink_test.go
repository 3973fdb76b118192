package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
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
	nemEffRecreate nemKind = "effrecreate" // delete and re-create the effects stream, same config: idle (Arg 0), with sends in flight (1), right after a broker kill mid-send (2)
	nemEffPurge    nemKind = "effpurge"    // purge the effects stream: at once (Arg 0), while a stored send's outcome is unknown (1)
	nemBrokerSend  nemKind = "brokersend"  // SIGKILL and restart of nats-server while Arg events are applied and their effects sent
	nemReviewList  nemKind = "review"      // outbox review --json lists the rows in review
)

// nemSinkState is what the natssink topology keeps beside its world.
type nemSinkState struct {
	mu    sync.Mutex
	kept  []webhooktest.StoredItem // messages of instances deleted, or purged from one, read before they went
	proxy *sendProxy               // between run and nats-server
}

// sendProxy is a TCP proxy between run and nats-server that can hold a
// send's answer: armed, it lets the next chunk run sends carrying the
// effects subject through to the server and then holds everything the
// server sends back, on every connection, until released. The send is at
// the server (stored, normally) and its acknowledgement never reaches run:
// an unknown outcome, made at will.
type sendProxy struct {
	*consumertest.Proxy
	mu     sync.Mutex
	trap   []byte
	sprung chan struct{}
	gate   chan struct{} // closed while the server's traffic flows
}

func newSendProxy(t testing.TB, target string) *sendProxy {
	p := &sendProxy{gate: make(chan struct{})}
	close(p.gate)
	p.Proxy = consumertest.NewProxy(t, target, consumertest.ProxyHooks{Before: p.answer, After: p.sprang})
	t.Cleanup(p.release) // before the proxy closes (cleanups run last first): no answer waits on the gate then
	return p
}

// answer holds the server's traffic while the gate is shut.
func (p *sendProxy) answer(up bool, _ int64, _ []byte) consumertest.Verdict {
	if !up {
		p.mu.Lock()
		gate := p.gate
		p.mu.Unlock()
		<-gate
	}
	return consumertest.Pass
}

// holdAnswerTo arms the trap; the channel closes once a send went through
// and the server's answers are held.
func (p *sendProxy) holdAnswerTo(pattern string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.trap, p.sprung = []byte(pattern), make(chan struct{})
	return p.sprung
}

// sprang shuts the gate once the client's chunk carrying the trap went.
func (p *sendProxy) sprang(up bool, _ int64, chunk []byte) consumertest.Verdict {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !up || p.trap == nil || !bytes.Contains(chunk, p.trap) {
		return consumertest.Pass
	}
	p.trap = nil
	p.gate = make(chan struct{})
	close(p.sprung)
	return consumertest.Pass
}

// release lets the server's traffic go again and disarms the trap.
func (p *sendProxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.trap = nil
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
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
			s.proxy = newSendProxy(w.t, fmt.Sprintf("127.0.0.1:%d", w.b.port))
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
		url: func(w *nemWorld) string { return w.b.url() },
		// run connects through the proxy; operators and the publisher do not.
		runArgs: func(w *nemWorld, _ string) []string { return []string{"--nats", nemSinkOf(w).proxy.URL()} },
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
			{nemEffRecreate, 4, between(0, 2)}, {nemEffPurge, 2, between(0, 1)}, {nemBrokerSend, 3, between(10, 40)}, {nemReviewList, 2, nil}},
	}
	nemStepFuncs[nemEffRecreate] = (*nemWorld).sinkRecreate
	nemStepFuncs[nemEffPurge] = (*nemWorld).sinkEffPurge
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

// effLast is the effects stream's last sequence, read past a restart.
func (w *nemWorld) effLast() uint64 {
	var last uint64
	consumertest.Eventually(w.t, time.Minute, "the effects stream's info", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := w.js.Stream(ctx, nemEffStream)
		if err == nil {
			last = s.CachedInfo().State.LastSeq
		}
		return err == nil
	})
	return last
}

// heldSend makes a send whose answer run never gets: n events are
// published, the proxy lets the first send of their effects through and
// holds what the server sends back; once the stream stored it, fault runs
// (the step's fault), then the server's traffic goes again.
func (w *nemWorld) heldSend(kind nemKind, n int, fault func()) {
	w.up()
	p := nemSinkOf(w).proxy
	before := w.effLast()
	sprung := p.holdAnswerTo(nemEffSubject)
	done := w.publishFreshAsync(n)
	select {
	case <-sprung:
		if !poll(10*time.Second, func() bool { return w.effLast() > before }) {
			w.t.Logf("%s: the held send was not stored within 10s", kind)
		}
	case <-time.After(30 * time.Second):
		w.t.Logf("%s: run sent nothing to the effects subject within 30s", kind)
	}
	fault()
	p.release()
	<-done
}

// sendsTimedOut waits until no row is sending: a held send's sink timeout
// ended it (queued to be sent again with its id, or review).
func (w *nemWorld) sendsTimedOut(kind nemKind) {
	if !poll(30*time.Second, func() bool { return len(w.rowsIn("sending")) == 0 }) {
		w.t.Logf("%s: rows still sending after 30s", kind)
	}
}

// sinkRecreate deletes the effects stream and makes it again with the same
// name, subject and window: issue 19's hole #1, a row in review must not be
// sent into the new instance unless it provably never reached the old one.
// Arg 0: while run idles; 1: with sends going; 2: while a send stored in the
// old instance has an unknown outcome at run (held), so its row is queued to
// be sent again with its id, or in review.
func (w *nemWorld) sinkRecreate(st nemStep) {
	switch st.Arg {
	case 1:
		w.up()
		done := w.publishFreshAsync(20)
		time.Sleep(time.Duration(w.rng.IntN(300)) * time.Millisecond) // when, in the sends, the stream goes: the experiment's variable
		w.recreateEffects()
		<-done
	case 2:
		w.heldSend(nemEffRecreate, 10, func() {
			w.sendsTimedOut(nemEffRecreate)
			w.recreateEffects()
		})
	default:
		w.up()
		w.recreateEffects()
	}
}

// recreateEffects seals the effects stream, keeps what it holds, deletes it
// and makes it again with the same config. Sealing first makes what is kept
// all the old instance stored (the reader's need: a send refused by a
// sealed stream is refused as by a deleted one).
func (w *nemWorld) recreateEffects() {
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
		if err := w.js.DeleteStream(ctx, nemEffStream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return false
		}
		_, err := w.js.CreateStream(ctx, cfg)
		return err == nil
	})
	w.t.Logf("recreate: the effects stream's old instance held %d messages", len(items))
}

// sinkEffPurge purges the effects stream: at once (Arg 0), or (1) while a
// send it stored has an unknown outcome at run, so that its row is queued
// to be sent again with its id (or in review) across the purge.
func (w *nemWorld) sinkEffPurge(st nemStep) {
	if st.Arg == 1 {
		w.heldSend(nemEffPurge, 10, func() {
			w.sendsTimedOut(nemEffPurge)
			w.sinkPurge()
		})
		return
	}
	w.sinkPurge()
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
// are sent: at a moment of the traffic, or (half the time) once a send it
// stored has its answer held, so run's outcome is unknown for certain
// (re-sent with the same id inside a long window, review under a short one).
func (w *nemWorld) sinkBrokerSend(st nemStep) {
	restart := func() {
		time.Sleep(time.Duration(w.rng.IntN(1500)) * time.Millisecond) // how long it stays down: the experiment's variable
		w.b.start()
	}
	if w.rng.IntN(2) == 0 {
		w.heldSend(nemBrokerSend, max(st.Arg, 1), func() { w.b.p.kill(); restart() })
		return
	}
	w.up()
	done := w.publishFreshAsync(max(st.Arg, 1))
	time.Sleep(time.Duration(50+w.rng.IntN(400)) * time.Millisecond) // the moment of the kill: the experiment's variable
	w.b.p.kill()
	restart()
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

// sinkMidSend is midsend's meaning here: run dies while a send it made is
// stored at the server and its answer held; nobody writes the row back, so
// the next run finds it sending past its lease.
func (w *nemWorld) sinkMidSend(nemStep) {
	w.heldSend(nemMidSend, 5, func() { w.run.kill() })
	w.startRun(nil)
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

// sinkReplay is replay with run's sink as the README has an operator give
// it: --effects-subject, as run has it; the effects of messages run was not
// sure to have handled are recorded for run's NATS sink.
func (w *nemWorld) sinkReplay(st nemStep) {
	if st.Arg == 2 {
		w.stopRun()
		w.publishFresh(10)
	}
	args := []string{"replay", "--nats", w.url(), "--db", w.db, "--stream", stream, "--schema", w.schema, "--apply", balanceApply,
		"--effects-subject", nemEffSubject, "--json", "--log-level", "warn", "--deadline", w.deadline.String(), "--buffer-wait", "200ms",
		"--commit-margin", "300ms", "--ack-margin", "200ms"}
	if st.Arg == 1 {
		args = append(args, "--to-seq", strconv.FormatUint(w.stream().LastSeq, 10))
	}
	w.operator(nemReplay, false, args...)
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
