package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/publisher"
	streams "github.com/jetledger/jetledger/stream"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// The edge topology: the hub is a nats-server process (domain hub) with the
// stream HUB on ev.>; run is the edge, its embedded server a leaf node of
// the hub through a fault proxy, its stream EV sourcing HUB filtered to
// site1's share. Traffic is published at the hub, so publish acks carry
// the hub's sequences while run, prune, purge, the dead letters and the
// conflicts speak of EV's: settle reads both streams, maps each copy at the
// edge to the hub message it came from (its Nats-Stream-Source header), and
// gives the model EV's sequences of the current EV instance.

const (
	topoEdge         = "edge"
	nemHubStream     = "HUB"
	nemEdgeDomain    = "site1"
	nemEdgeSubject   = "ev.site1.pay"
	nemRefundSubject = "ev.site1.refund"
	nemSite2Subject  = "ev.site2.pay"  // another site's share: never sourced here
	nemCatchUp       = 2 * time.Minute // README: sourcing can take about 35s to resume after a hub restart
)

// nemEdgeFilters go from the broadest to the narrowest: a --hub-filter
// change picks one at or after the current (equivalent for the traffic on
// ev.site1.pay, the last one narrower: it leaves refunds out). Broadening
// is not modelled: README says what it skips only roughly.
var nemEdgeFilters = []string{"ev.site1.>", "ev.site1.*", "ev.site1.pay"}

const (
	nemHubKill     nemKind = "hubkill"     // SIGKILL and restart of the hub while Arg events are published at it
	nemLinkReset   nemKind = "linkreset"   // the leaf link reset three times while Arg events are published at the hub
	nemLinkCut     nemKind = "linkcut"     // the leaf link held (one way, or both: odd Arg) a while, Arg events published meanwhile
	nemHubFilter   nemKind = "filter"      // run restarted with an equivalent or narrower --hub-filter; even Arg: EV deleted first as README says
	nemHubRecreate nemKind = "hubrecreate" // HUB deleted and made again at the hub
	nemHubPurge    nemKind = "hubpurge"    // with the link cut, 5 published and HUB purged keeping Arg: what the edge had not sourced is gone
	nemRefund      nemKind = "refund"      // Arg fresh events on ev.site1.refund (left out by the narrowest filter)
	nemSite2       nemKind = "site2"       // Arg events on another site's subject: never sourced, never applied
)

type nemCopyKind int

const (
	copyGood nemCopyKind = iota
	copyBad
	copyConflict
	copyNoID
	copyForeign // not the schedule's traffic for this site
)

// hubKey names a hub message: the HUB instance (nats-server's identity of
// it) and its sequence there.
type hubKey struct {
	ident string
	seq   uint64
}

type hubCopy struct {
	key         hubKey
	id, subject string
	kind        nemCopyKind
	gone        bool // taken at the hub before the edge sourced it, by the schedule
}

type edgeCopy struct {
	seq         uint64
	hub         hubKey
	id, subject string
	kind        nemCopyKind
}

// nemEdgeInst is one instance of EV, as read so far.
type nemEdgeInst struct {
	created time.Time
	filter  string
	start   uint64 // its source's start sequence (0: HUB's start)
	hub     string // the HUB instance when it was made, which start is of
	read    uint64 // the last sequence read
	msgs    []edgeCopy
}

// nemEdge is the edge world's state: the hub, the link, and what both
// streams held.
type nemEdge struct {
	hub        *hub
	proxy      *faultProxy
	hjs        jetstream.JetStream
	filter     string // run's --hub-filter
	hubIdent   string // the current HUB instance
	hubRead    uint64 // its last sequence read
	hubCopies  []*hubCopy
	insts      []*nemEdgeInst // every EV instance; the last is the current one
	resolved   map[hubKey][]int
	frozenNoID []uint64            // judged in an earlier EV instance (dead-lettered there)
	frozenConf map[string][]uint64 // recorded as conflicts in an earlier EV instance
	epochs     map[string]int      // the model's epochs at the last settle: a rise is a prune
	prunedAt   map[hubKey]int      // hub messages at the edge when a prune removed their id's row: the EV instance then
	unread     int                 // EV messages gone before they were read
	deduped    int
}

func (e *nemEdge) cur() *nemEdgeInst { return e.insts[len(e.insts)-1] }

func (e *nemEdge) leafURL() string { return "nats-leaf://" + e.proxy.Addr() }

func init() {
	nemTopologies[topoEdge] = &nemTopology{
		setup: func(w *nemWorld) {
			e := &nemEdge{hub: startNemHub(w.t), filter: nemEdgeFilters[0], resolved: map[hubKey][]int{},
				frozenConf: map[string][]uint64{}, epochs: map[string]int{}, prunedAt: map[hubKey]int{}}
			w.edge = e
			e.hjs = connectTo(w.t, e.hub.url())
			e.createHub(w)
			e.proxy = newFaultProxy(w.t, fmt.Sprintf("127.0.0.1:%d", e.hub.leafPort))
			w.port = freePort(w.t)
			w.subject, w.pubJS = nemEdgeSubject, e.hjs
			w.startRun(nil)
			w.js = connectTo(w.t, w.url())
		},
		url: func(w *nemWorld) string { return fmt.Sprintf("nats://127.0.0.1:%d", w.port) },
		runArgs: func(w *nemWorld, _ string) []string {
			return []string{"--listen", fmt.Sprintf("127.0.0.1:%d", w.port), "--hub-url", w.edge.leafURL(), "--hub-stream", nemHubStream,
				"--hub-filter", w.edge.filter, "--edge-domain", nemEdgeDomain, "--duplicate-window", nemDupWindow.String()}
		},
		extra: []nemWeight{{nemHubKill, 1, between(5, 30)}, {nemLinkReset, 3, between(10, 40)}, {nemLinkCut, 3, between(10, 40)},
			{nemHubFilter, 2, between(0, 5)}, {nemRecreate, 1, nil}, {nemHubRecreate, 1, nil}, {nemHubPurge, 1, between(0, 8)},
			{nemRefund, 3, between(3, 15)}, {nemSite2, 2, between(3, 10)}},
		// recreate: the operator deletes EV, and run makes it again,
		// starting after what a prune removed (the source floor).
		steps:  map[nemKind]func(*nemWorld, nemStep){nemRecreate: func(w *nemWorld, _ nemStep) { w.edge.remake(w, w.edge.filter, true) }},
		settle: func(w *nemWorld) { w.edge.settle(w) },
		check:  func(w *nemWorld) { w.edge.check(w) },
	}
	nemStepFuncs[nemHubKill] = func(w *nemWorld, st nemStep) {
		w.up()
		done := w.publishFreshAsync(max(st.Arg, 1))
		time.Sleep(time.Duration(w.rng.IntN(400)) * time.Millisecond) // the moment of the kill is the experiment's variable
		w.edge.hub.p.kill()
		time.Sleep(time.Duration(200+w.rng.IntN(800)) * time.Millisecond) // the hub stays down a while: the experiment's variable
		w.edge.hub.start()
		<-done
	}
	nemStepFuncs[nemLinkReset] = func(w *nemWorld, st nemStep) {
		w.up()
		done := w.publishFreshAsync(max(st.Arg, 1))
		for range 3 {
			time.Sleep(time.Duration(100+w.rng.IntN(400)) * time.Millisecond) // the moment of the reset is the experiment's variable
			if !poll(30*time.Second, func() bool { return w.edge.proxy.Open() > 0 }) {
				w.t.Logf("linkreset: the leaf link did not come back through the proxy within 30s: %s", lastLines(w.edge.hub.p.output(), 12))
			}
			w.t.Logf("linkreset: %d connections reset", w.edge.proxy.Reset())
		}
		<-done
	}
	nemStepFuncs[nemLinkCut] = func(w *nemWorld, st nemStep) {
		w.up()
		done := w.publishFreshAsync(max(st.Arg, 1))
		time.Sleep(time.Duration(w.rng.IntN(300)) * time.Millisecond) // the moment of the cut: the experiment's variable
		w.edge.proxy.hold(st.Arg%2 == 1)
		time.Sleep(time.Duration(500+w.rng.IntN(2500)) * time.Millisecond) // the partition's length: the experiment's variable
		w.edge.proxy.release()
		<-done
	}
	nemStepFuncs[nemHubFilter] = func(w *nemWorld, st nemStep) {
		i := 0
		for j, f := range nemEdgeFilters {
			if f == w.edge.filter {
				i = j
			}
		}
		j := i + (st.Arg/2)%(len(nemEdgeFilters)-i)
		w.edge.remake(w, nemEdgeFilters[j], st.Arg%2 == 0)
	}
	nemStepFuncs[nemHubRecreate] = func(w *nemWorld, _ nemStep) { w.edge.remakeHub(w) }
	nemStepFuncs[nemHubPurge] = func(w *nemWorld, st nemStep) { w.edge.purgeHub(w, st.Arg) }
	nemStepFuncs[nemRefund] = func(w *nemWorld, st nemStep) {
		w.subject = nemRefundSubject
		w.publishFresh(max(st.Arg, 1))
		w.subject = nemEdgeSubject
	}
	nemStepFuncs[nemSite2] = func(w *nemWorld, st nemStep) {
		for range max(st.Arg, 1) {
			ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
			e := event{ID: w.pub.NewID(), Account: "acct-site2", Amount: 1}
			if _, err := w.pub.Publish(ctx, publisher.Message{Subject: nemSite2Subject, ID: e.ID, Data: e.data()}); err != nil {
				w.t.Logf("site2: %v", err)
			}
			cancel()
		}
	}
}

// startNemHub is startHub whose leaf port advertises no other URL: a leaf
// node learns a hub's advertised leaf URLs and reconnects to them, past
// the proxy that is the link.
func startNemHub(t testing.TB) *hub {
	dir := t.TempDir()
	h := &hub{t: t, bin: natsServerBinary(t), conf: filepath.Join(dir, "hub.conf"), port: freePort(t), leafPort: freePort(t)}
	conf := fmt.Sprintf("server_name: hub\nlisten: 127.0.0.1:%d\njetstream { store_dir: %q, domain: hub }\nleafnodes { listen: 127.0.0.1:%d, no_advertise: true }\n",
		h.port, filepath.Join(dir, "store"), h.leafPort)
	if err := os.WriteFile(h.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	h.start()
	return h
}

// createHub makes HUB, and starts reading it from its start.
func (e *nemEdge) createHub(w *nemWorld) {
	var info *jetstream.StreamInfo
	consumertest.Eventually(w.t, time.Minute, "HUB created", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		s, err := e.hjs.CreateStream(ctx, jetstream.StreamConfig{Name: nemHubStream, Subjects: []string{"ev.>"}, Duplicates: nemDupWindow})
		if err == nil {
			info = s.CachedInfo()
		}
		return err == nil
	})
	e.hubIdent, e.hubRead = streams.Identity(info.Created), 0
}

// getMsg reads one message of a stream, riding out a server restarting;
// nil when it is not there.
func getMsg(w *nemWorld, js jetstream.JetStream, name string, seq uint64) *jetstream.RawStreamMsg {
	var m *jetstream.RawStreamMsg
	consumertest.Eventually(w.t, time.Minute, fmt.Sprintf("%s message %d", name, seq), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, name)
		if err != nil {
			return false
		}
		m, err = s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			m = nil
			return true
		}
		return err == nil
	})
	return m
}

func infoOf(w *nemWorld, js jetstream.JetStream, name string) *jetstream.StreamInfo {
	var info *jetstream.StreamInfo
	consumertest.Eventually(w.t, time.Minute, name+" info", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, name)
		if err != nil {
			return false
		}
		info, err = s.Info(ctx)
		return err == nil
	})
	return info
}

// kindOf tells what a message is to the model.
func (w *nemWorld) kindOf(id string, data []byte) nemCopyKind {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	ev, good := w.m.evs[id]
	switch {
	case id == "":
		return copyNoID
	case w.m.bad[id]:
		return copyBad
	case !good:
		return copyForeign
	case bytes.Equal(data, ev.data()):
		return copyGood
	default:
		return copyConflict
	}
}

// readHub reads what HUB holds past the last read.
func (e *nemEdge) readHub(w *nemWorld) {
	info := infoOf(w, e.hjs, nemHubStream)
	for seq := max(e.hubRead+1, info.State.FirstSeq); seq <= info.State.LastSeq; seq++ {
		m := getMsg(w, e.hjs, nemHubStream, seq)
		if m == nil {
			continue
		}
		id := m.Header.Get(jetstream.MsgIDHeader)
		e.hubCopies = append(e.hubCopies, &hubCopy{key: hubKey{e.hubIdent, seq}, id: id, subject: m.Subject, kind: w.kindOf(id, m.Data)})
	}
	e.hubRead = max(e.hubRead, info.State.LastSeq)
}

// readEdge reads what EV holds past the last read, noting a new instance,
// and judges each copy as it appears: on a subject its filter takes, of
// this site's traffic, and not a hub message whose row a prune removed
// brought back by an instance made later.
func (e *nemEdge) readEdge(w *nemWorld) {
	info := infoOf(w, w.js, stream)
	if len(e.insts) == 0 || !info.Created.Equal(e.cur().created) {
		inst := &nemEdgeInst{created: info.Created, hub: e.hubIdent}
		if len(info.Config.Sources) == 1 {
			inst.filter, inst.start = sourceFilterStart(info.Config)
		} else {
			w.m.violate("edge: EV has %d sources, want HUB alone", len(info.Config.Sources))
		}
		e.insts = append(e.insts, inst)
		w.t.Logf("edge: EV instance %d, created %s, filter %q, sourcing HUB from %d", len(e.insts)-1, info.Created, inst.filter, inst.start)
	}
	cur, idx := e.cur(), len(e.insts)-1
	if info.State.FirstSeq > cur.read+1 {
		e.unread += int(info.State.FirstSeq - cur.read - 1)
	}
	for seq := max(cur.read+1, info.State.FirstSeq); seq <= info.State.LastSeq; seq++ {
		m := getMsg(w, w.js, stream, seq)
		if m == nil {
			continue
		}
		f := strings.Split(m.Header.Get("Nats-Stream-Source"), " ")
		var src hubKey
		if len(f) >= 6 {
			src.ident = f[5]
			src.seq, _ = strconv.ParseUint(f[1], 10, 64)
		}
		id := m.Header.Get(jetstream.MsgIDHeader)
		c := edgeCopy{seq: seq, hub: src, id: id, subject: m.Subject, kind: w.kindOf(id, m.Data)}
		cur.msgs = append(cur.msgs, c)
		e.resolved[src] = append(e.resolved[src], idx)
		switch {
		case src.seq == 0:
			w.m.violate("edge: EV message %d has no Nats-Stream-Source naming the HUB instance: %q", seq, m.Header.Get("Nats-Stream-Source"))
		case cur.filter != "" && !server.SubjectMatchesFilter(m.Subject, cur.filter):
			w.m.violate("edge: EV (filter %q) holds HUB message %d on %s", cur.filter, src.seq, m.Subject)
		case c.kind == copyForeign:
			w.m.violate("edge: EV holds HUB message %d (%s, id %s), which is not this site's traffic", src.seq, m.Subject, id)
		}
		if at, ok := e.prunedAt[src]; ok && idx > at {
			w.m.violate("edge: EV instance %d copied HUB message %d of %s again at %d, after a prune removed its row (then in instance %d): it is applied a second time",
				idx, src.seq, id, seq, at)
		}
	}
	cur.read = max(cur.read, info.State.LastSeq)
}

// lastWanted is the last HUB message the current EV instance must copy.
func (e *nemEdge) lastWanted() *hubCopy {
	cur := e.cur()
	for i := len(e.hubCopies) - 1; i >= 0; i-- {
		c := e.hubCopies[i]
		if c.key.ident != e.hubIdent || (c.key.ident == cur.hub && c.key.seq < cur.start) {
			break // an earlier HUB instance was settled before it went
		}
		if !c.gone && (cur.filter == "" || server.SubjectMatchesFilter(c.subject, cur.filter)) {
			return c
		}
	}
	return nil
}

// sourceFilterStart is the filter and start of cfg's one source: a
// durable source's (a consumer on the hub) are on its consumer, and the
// copy's metadata says them; read from the source itself they were "" and
// 0, and another site's message published last was waited for in vain.
func sourceFilterStart(cfg jetstream.StreamConfig) (string, uint64) {
	src := cfg.Sources[0]
	if src.Consumer == nil {
		return src.FilterSubject, src.OptStartSeq
	}
	start, _ := strconv.ParseUint(cfg.Metadata[streams.MetaSourceStart], 10, 64)
	return cfg.Metadata[streams.MetaSourceFilter], start
}

func (e *nemEdge) caughtUp(c *hubCopy) bool {
	for _, ec := range e.cur().msgs {
		if ec.hub.ident == c.key.ident && ec.hub.seq >= c.key.seq {
			return true
		}
	}
	return false
}

// settle waits until EV holds everything HUB holds for its filter (the
// last such message copied: sourcing keeps the hub's order), reads both,
// and rebuilds the model's sequences from EV's current instance and what
// earlier instances settled. A last message the edge's duplicate window
// may drop (its id has another copy) cannot show that: a fresh event is
// published after it.
func (e *nemEdge) settle(w *nemWorld) {
	w.up()
	// Prunes since the last settle (the model counts each row a prune
	// removed): the hub messages at the edge by then must never come back.
	w.m.mu.Lock()
	for id, n := range w.m.epochs {
		if n > e.epochs[id] {
			for _, c := range e.hubCopies {
				if c.id == id && len(e.resolved[c.key]) > 0 {
					if _, ok := e.prunedAt[c.key]; !ok {
						e.prunedAt[c.key] = len(e.insts) - 1
					}
				}
			}
		}
		e.epochs[id] = n
	}
	w.m.mu.Unlock()
	began := time.Now()
	e.readHub(w)
	marked := false
	for {
		e.readEdge(w)
		last := e.lastWanted()
		if last == nil || e.caughtUp(last) {
			break
		}
		if !marked && last.id != "" && e.copiesOf(last.id) > 1 {
			marked = true
			w.publishFresh(1)
			e.readHub(w)
			continue
		}
		if time.Since(began) > nemCatchUp {
			w.m.violate("edge: EV has not copied HUB message %d (%s) within %s; the link is %d connections", last.key.seq, last.subject, nemCatchUp, e.proxy.Open())
			break
		}
		time.Sleep(100 * time.Millisecond) // polling a condition with a deadline
	}
	if d := time.Since(began); d > 5*time.Second {
		w.t.Logf("edge: EV caught up with HUB in %s", d.Round(time.Millisecond))
	}
	e.rebuild(w)
}

func (e *nemEdge) copiesOf(id string) int {
	n := 0
	for _, c := range e.hubCopies {
		if c.id == id {
			n++
		}
	}
	return n
}

// rebuild gives the model EV's sequences: the current instance's copies of
// each id (what prune and purge compare with EV), and the conflicts and
// messages without an id to judge, those an earlier instance settled
// included. A good message the current filter leaves out may never be
// applied.
func (e *nemEdge) rebuild(w *nemWorld) {
	snap := w.snapshot()
	m := w.m
	m.mu.Lock()
	defer m.mu.Unlock()
	copies, conflicts := map[string][]uint64{}, map[string][]uint64{}
	for id, s := range e.frozenConf {
		conflicts[id] = append([]uint64{}, s...)
	}
	noID := append([]uint64{}, e.frozenNoID...)
	for _, c := range e.cur().msgs {
		switch c.kind {
		case copyGood, copyBad:
			copies[c.id] = append(copies[c.id], c.seq)
		case copyConflict:
			copies[c.id] = append(copies[c.id], c.seq)
			conflicts[c.id] = append(conflicts[c.id], c.seq)
		case copyNoID:
			noID = append(noID, c.seq)
		}
	}
	m.copies, m.conflicts, m.noID = copies, conflicts, noID
	filter := e.cur().filter
	for _, c := range e.hubCopies {
		if c.kind == copyGood && filter != "" && !server.SubjectMatchesFilter(c.subject, filter) && !snap.applied[c.id] {
			m.gone[c.id] = true
		}
	}
}

// remake has run restarted with filter; with del the operator deletes EV
// first, as README says to change --hub-filter, and run makes it again.
// Without, run must warn and use EV as it is. What the old instance
// settled (dead letters, conflicts) stays judged; what it had not, its
// new instance takes from HUB again.
func (e *nemEdge) remake(w *nemWorld, filter string, del bool) {
	e.settle(w)
	if del {
		// The edge's server fsyncs every write, and on a loaded host a
		// delete can outlast the client's API timeout: ask again; a delete
		// that went through answers not-found.
		consumertest.Eventually(w.t, time.Minute, "EV deleted", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			err := w.js.DeleteStream(ctx, stream)
			return err == nil || errors.Is(err, jetstream.ErrStreamNotFound)
		})
	}
	w.run.stop()
	code := w.run.wait(time.Minute)
	w.down = true
	if code != 0 {
		// With its stream deleted under it, run may fail (TestEdgeRecreatedStreamStartsAfterPruned).
		w.t.Logf("edge: run exited %d after EV was deleted: %s", code, lastLine(w.run.output()))
		if !del {
			w.m.violate("%s: run exited %d after SIGTERM: %s", nemHubFilter, code, lastLine(w.run.output()))
		}
	}
	if del {
		snap := w.snapshot()
		w.m.mu.Lock()
		for _, c := range e.cur().msgs {
			switch {
			case c.kind == copyNoID && (snap.deadSeqs[c.seq] || w.m.discSeq[c.seq]):
				e.frozenNoID = append(e.frozenNoID, c.seq)
			case c.kind == copyConflict && snap.conflicts[c.seq]:
				e.frozenConf[c.id] = append(e.frozenConf[c.id], c.seq)
			}
		}
		w.m.mu.Unlock()
	}
	e.filter = filter
	w.startRun(nil)
	select {
	case <-w.run.done:
		w.m.violate("edge: run with --hub-filter %s exited at start: %s", filter, tail(w.run.output()))
		w.down = true
	default:
	}
}

// remakeHub deletes HUB at the hub and makes it again: README says a hub
// stream made again is another instance, copied from its start.
func (e *nemEdge) remakeHub(w *nemWorld) {
	e.settle(w)
	consumertest.Eventually(w.t, time.Minute, "HUB deleted", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		err := e.hjs.DeleteStream(ctx, nemHubStream)
		return err == nil || errors.Is(err, jetstream.ErrStreamNotFound)
	})
	for _, c := range e.hubCopies {
		if c.key.ident == e.hubIdent && len(e.resolved[c.key]) == 0 {
			c.gone = true
		}
	}
	e.createHub(w)
}

// purgeHub cuts the link, publishes five the edge cannot copy yet, and
// purges HUB keeping keep: what the edge had not copied is gone, by the
// schedule's doing; the edge's sourcing must go on after the gap.
func (e *nemEdge) purgeHub(w *nemWorld, keep int) {
	e.settle(w)
	e.proxy.hold(true)
	defer e.proxy.release()
	w.publishFresh(5)
	e.readHub(w)
	consumertest.Eventually(w.t, 30*time.Second, "a HUB purge", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := e.hjs.Stream(ctx, nemHubStream)
		return err == nil && s.Purge(ctx, jetstream.WithPurgeKeep(uint64(keep))) == nil
	})
	first := infoOf(w, e.hjs, nemHubStream).State.FirstSeq
	e.readEdge(w)
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	for _, c := range e.hubCopies {
		if c.key.ident == e.hubIdent && c.key.seq < first && len(e.resolved[c.key]) == 0 {
			c.gone = true
			if c.kind == copyGood {
				w.m.gone[c.id] = true
			}
		}
	}
}

// check, after the drain: every HUB message for this site reached the edge,
// unless the schedule took it at the hub, the filter left it out, or the
// edge's duplicate window dropped it (its id has another copy there).
func (e *nemEdge) check(w *nemWorld) {
	atEdge := map[string]bool{}
	for _, inst := range e.insts {
		for _, c := range inst.msgs {
			atEdge[c.id] = true
		}
	}
	filter := e.cur().filter
	var missing []string
	for _, c := range e.hubCopies {
		switch {
		case len(e.resolved[c.key]) > 0, c.gone, c.kind == copyForeign:
		case filter != "" && !server.SubjectMatchesFilter(c.subject, filter):
		case c.id != "" && atEdge[c.id]:
			e.deduped++
		default:
			missing = append(missing, fmt.Sprintf("%d (%s, id %q)", c.key.seq, c.subject, c.id))
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		w.m.violate("edge: %d HUB messages for this site never reached the edge: %s", len(missing), strings.Join(missing[:min(10, len(missing))], ", "))
	}
	w.t.Logf("edge: %d HUB messages read, %d EV instances, %d copies dropped by the edge's duplicate window, %d EV messages gone before they were read, %d hub messages pruned at the edge",
		len(e.hubCopies), len(e.insts), e.deduped, e.unread, len(e.prunedAt))
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}
