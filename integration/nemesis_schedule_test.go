package integration

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
)

// A nemesis schedule is a list of steps, generated from a seed for one
// topology. A step names what to do and one number (how many to publish,
// which earlier id to pick, how many messages a purge keeps); what a step
// picks at run time (which dead letter, which review row) comes from the
// run's own generator, seeded from the schedule's seed, so a schedule
// replays from its seed and its steps alone.

// nemKind is what a step does.
type nemKind string

const (
	// Traffic.
	nemPublish  nemKind = "pub"      // Arg fresh events
	nemDupIn    nemKind = "dupin"    // an id just published, again, inside the window: the stream drops it
	nemDupPast  nemKind = "duppast"  // an earlier id, same payload, past the window: the ledger dedupes it
	nemConflict nemKind = "conflict" // an applied id with another payload: a conflict, never applied
	nemNoID     nemKind = "noid"     // a message without Nats-Msg-Id: dead-lettered
	nemBad      nemKind = "bad"      // a payload --apply cannot read: dead-lettered
	// Process faults.
	nemKill       nemKind = "kill"       // SIGKILL of run while Arg events arrive, and a restart
	nemKillCommit nemKind = "killcommit" // run dies between a batch's commit and its acks (fault point)
	nemMidSend    nemKind = "midsend"    // run dies while the destination holds a stored item's answer
	nemPause      nemKind = "pause"      // SIGSTOP past AckWait with a second run meanwhile, SIGCONT
	nemBroker     nemKind = "broker"     // SIGKILL and restart of nats-server
	nemHang       nemKind = "hang"       // the destination holds requests past the sink timeout
	nem500        nemKind = "d500"       // the destination stores, then answers 500
	nemStop       nemKind = "stop"       // SIGTERM of run; it stays down until the next start
	nemStart      nemKind = "start"      // run again (a no-op when it runs)
	nemFlags      nemKind = "flags"      // restart run with other --batch and --deadline (Arg picks)
	// Operator actions.
	nemPrune    nemKind = "prune"    // ledger prune
	nemReplay   nemKind = "replay"   // replay to run's bound (Arg 0), --to-seq the stream's end (1), with run stopped and traffic going on (2)
	nemPurge    nemKind = "purge"    // stream purge keeping the last Arg messages
	nemRequeue  nemKind = "requeue"  // dlq requeue of a dead letter
	nemDiscard  nemKind = "discard"  // dlq discard of a dead letter
	nemResolve  nemKind = "resolve"  // outbox resolve of a review row, as the destination says
	nemCancel   nemKind = "cancel"   // outbox cancel of a sent row
	nemRetry    nemKind = "retry"    // outbox retry of a failed row
	nemHandover nemKind = "handover" // stop, ledger backup, run on the copy
	nemRecreate nemKind = "recreate" // the stream deleted under run and made again
	nemClock    nemKind = "clock"    // run's ledger clock jumps (Arg picks the offset)
	nemNet      nemKind = "net"      // between run and the server: resets (Arg 0), run's traffic held past AckWait (1), a partition (2)
	nemPowerCut nemKind = "powercut" // the disk loses what was not synced, and the host dies (lazyfs)
)

// nemStep is one step of a schedule.
type nemStep struct {
	Kind nemKind
	Arg  int
}

func (s nemStep) String() string {
	if s.Arg == 0 {
		return string(s.Kind)
	}
	return fmt.Sprintf("%s:%d", s.Kind, s.Arg)
}

// formatSteps writes steps as -nemesis.steps takes them.
func formatSteps(steps []nemStep) string {
	parts := make([]string, len(steps))
	for i, s := range steps {
		parts[i] = s.String()
	}
	return strings.Join(parts, ",")
}

// parseSteps reads -nemesis.steps, of the kinds of topos (default: every
// topology's of nemTopos).
func parseSteps(s string, topos ...string) ([]nemStep, error) {
	var out []nemStep
	known := map[nemKind]bool{}
	if len(topos) == 0 {
		topos = nemTopos()
	}
	for _, topo := range topos {
		for _, w := range nemWeights(topo) {
			known[w.kind] = true
		}
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, arg, _ := strings.Cut(part, ":")
		st := nemStep{Kind: nemKind(name)}
		if !known[st.Kind] {
			return nil, fmt.Errorf("step %q: unknown kind %q", part, name)
		}
		if arg != "" {
			n, err := strconv.Atoi(arg)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("step %q: %q is not a count", part, arg)
			}
			st.Arg = n
		}
		out = append(out, st)
	}
	return out, nil
}

const (
	topoEmbedded = "embedded" // run without --nats: SIGKILL of run kills the server too
	topoExternal = "external" // run --nats to a nats-server process
)

// nemTopology is what a topology brings to the world: how it starts its
// servers and streams, where clients connect, run's flags beyond the common
// ones, the ledgers it writes, and the steps it adds to the common ones.
// Topologies register themselves in nemTopologies (init) and run in the
// order of nemTopoOrder, so a seed picks the same topology on every machine.
type nemTopology struct {
	setup   func(w *nemWorld)                     // servers and streams, then w.startRun
	url     func(w *nemWorld) string              // operators and the publisher connect here
	runArgs func(w *nemWorld, db string) []string // run's topology flags
	ledgers func(w *nemWorld) []string            // nil: w.db alone
	extra   []nemWeight                           // steps only this topology can take
	// idempotent: the webhook destination honours Idempotency-Key (run
	// --webhook-idempotent), so unknown outcomes are re-sent, not reviewed.
	idempotent bool
	// A topology whose effects go elsewhere than the webhook destination:
	// run's sink flags (nil: webhookArgs(w.dest)), what the destination
	// holds as the checker reads it (nil: w.dest.Items()), its own meaning
	// of common steps, and the common steps it cannot take.
	sinkArgs func(w *nemWorld) []string
	items    func(w *nemWorld) []webhooktest.StoredItem
	steps    map[nemKind]func(w *nemWorld, st nemStep)
	without  map[nemKind]bool
	// Optional, for a partitioned stream: each ledger and the durable that
	// feeds it (nil: w.db and "jetledger"), the subject an account's events
	// are published on (nil: subject), and checks of its own, run after the
	// drain before nemCheck's.
	parts   func(w *nemWorld) []nemPart
	subject func(w *nemWorld, account string) string
	check   func(w *nemWorld)
	settle  func(w *nemWorld) // nil: publish acks are run's stream's sequences (nemWorld.settle)
}

var (
	nemTopoOrder  = []string{topoEmbedded, topoExternal, "edge", "cluster", "natssink", topoPowerCut, topoIdempotent}
	nemTopologies = map[string]*nemTopology{}
	// nemStepFuncs are steps registered by a topology's file; the common
	// ones are in nemWorld.do.
	nemStepFuncs = map[nemKind]func(w *nemWorld, st nemStep){}
)

// nemTopos is every registered topology, in nemTopoOrder.
func nemTopos() []string {
	var out []string
	for _, name := range nemTopoOrder {
		if nemTopologies[name] != nil {
			out = append(out, name)
		}
	}
	return out
}

type nemWeight struct {
	kind   nemKind
	weight int
	arg    func(*rand.Rand) int
}

func between(lo, hi int) func(*rand.Rand) int {
	return func(r *rand.Rand) int { return lo + r.IntN(hi-lo+1) }
}

// nemWeights is how often each kind comes up in a topology's schedules: the
// steps every topology can take, and its own (nemTopology.extra). With the
// embedded server a second run cannot share the store (pause), the broker
// is run itself, a ledger handed over to a new file would start a new
// store, and run down means no server to publish to: those are external's.
func nemWeights(topo string) []nemWeight {
	n := between
	ws := []nemWeight{
		{nemPublish, 10, n(5, 40)}, {nemDupIn, 3, nil}, {nemDupPast, 5, n(0, 50)}, {nemConflict, 3, n(0, 50)},
		{nemNoID, 2, nil}, {nemBad, 2, nil},
		{nemKill, 4, n(5, 30)}, {nemKillCommit, 2, n(3, 10)}, {nemMidSend, 2, nil}, {nemHang, 2, nil}, {nem500, 2, nil},
		{nemFlags, 2, n(0, 7)},
		{nemPrune, 5, nil}, {nemReplay, 4, n(0, 2)}, {nemPurge, 3, n(0, 8)},
		{nemRequeue, 2, nil}, {nemDiscard, 2, nil}, {nemResolve, 3, nil}, {nemCancel, 2, nil}, {nemRetry, 1, nil},
		{nemRecreate, 1, nil}, {nemClock, 2, n(0, 4)}, {nemAPI, 4, n(0, 5)},
	}
	if t := nemTopologies[topo]; t != nil {
		ws = slices.DeleteFunc(ws, func(w nemWeight) bool { return t.without[w.kind] })
		ws = append(ws, t.extra...)
	}
	return ws
}

// generate makes a schedule of n steps for topo from rng; it starts with a
// publish so the first operator action has something to act on.
func generate(rng *rand.Rand, topo string, n int) []nemStep {
	ws := nemWeights(topo)
	total := 0
	for _, w := range ws {
		total += w.weight
	}
	steps := []nemStep{{Kind: nemPublish, Arg: 10 + rng.IntN(20)}}
	for len(steps) < n {
		r := rng.IntN(total)
		for _, w := range ws {
			if r -= w.weight; r < 0 {
				st := nemStep{Kind: w.kind}
				if w.arg != nil {
					st.Arg = w.arg(rng)
				}
				steps = append(steps, st)
				break
			}
		}
	}
	return steps
}
