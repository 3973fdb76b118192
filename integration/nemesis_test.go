package integration

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

var (
	nemSeedFlag  = flag.Uint64("nemesis.seed", 0, "run only the nemesis schedule of this seed (with -nemesis.topology)")
	nemStepsFlag = flag.String("nemesis.steps", "", "run these nemesis steps (as a failing schedule prints them) instead of the seed's")
	nemTopoFlag  = flag.String("nemesis.topology", "", "the topology of -nemesis.seed: embedded, external, edge, cluster, natssink, powercut or idempotent (default: the seed's)")
)

// nemProfile sizes a nemesis run. JETLEDGER_NEMESIS=long selects the long
// profile; JETLEDGER_NEMESIS_SCHEDULES, _STEPS and _SHRINK override its size
// and the shrinking budget of a failing schedule; JETLEDGER_NEMESIS_REPORT
// names a file for the figures.
type nemProfile struct {
	Name      string        `json:"name"`
	Schedules int           `json:"schedules"`
	Steps     int           `json:"steps"`
	Shrink    time.Duration `json:"shrink"`
	StopFirst bool          `json:"stop_at_first_failure"`
}

func nemProfileFromEnv(t *testing.T) nemProfile {
	// Short: a fixed seed on each topology and two from the clock.
	p := nemProfile{Name: "short", Schedules: len(nemTopos()) + 2, Steps: 12, Shrink: 90 * time.Second}
	if os.Getenv("JETLEDGER_NEMESIS") == "long" {
		p = nemProfile{Name: "long", Schedules: 200, Steps: 18, Shrink: 10 * time.Minute}
	}
	for env, dst := range map[string]*int{"JETLEDGER_NEMESIS_SCHEDULES": &p.Schedules, "JETLEDGER_NEMESIS_STEPS": &p.Steps} {
		if v := os.Getenv(env); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: want a positive number", env, v)
			}
			*dst = n
		}
	}
	if v := os.Getenv("JETLEDGER_NEMESIS_SHRINK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("JETLEDGER_NEMESIS_SHRINK=%q: %v", v, err)
		}
		p.Shrink = d
	}
	p.StopFirst = os.Getenv("JETLEDGER_NEMESIS_STOP_FIRST") != ""
	return p
}

// nemSchedule is one schedule: a seed, its topology and steps.
type nemSchedule struct {
	Seed  uint64
	Topo  string
	Steps []nemStep
}

func (s nemSchedule) replay() string {
	return fmt.Sprintf("go test ./integration -run 'TestNemesis$' -nemesis.seed=%d -nemesis.topology=%s -nemesis.steps='%s'",
		s.Seed, s.Topo, formatSteps(s.Steps))
}

// topologyOf is the topology a seed's schedule runs on: in turn, so that
// consecutive seeds cover each.
func topologyOf(seed uint64) string {
	topos := nemTopos()
	return topos[seed%uint64(len(topos))]
}

func scheduleOf(seed uint64, topo string, steps int) nemSchedule {
	rng := rand.New(rand.NewPCG(seed, 2020))
	return nemSchedule{Seed: seed, Topo: topo, Steps: generate(rng, topo, steps)}
}

// execute runs a schedule in a world of its own, drains, and checks; it
// returns what the checker (or the harness) found, and the figures.
func execute(t *testing.T, s nemSchedule) ([]string, *nemStats, []string) {
	began := time.Now()
	tb := &nemTB{TB: t, dir: t.TempDir()}
	var w *nemWorld
	done := make(chan struct{})
	go func() {
		defer close(done)
		completed := false
		defer func() {
			if !completed && !tb.Failed() {
				tb.fail("the schedule stopped without a failure recorded")
			}
		}()
		w = newNemWorld(tb, s.Topo, s.Seed)
		for i, st := range s.Steps {
			tb.Logf("step %d: %s (%s)", i, st, time.Since(began).Round(time.Millisecond))
			w.do(st)
		}
		w.drain()
		nemCheck(w)
		completed = true
	}()
	<-done
	tb.runCleanups()
	var found []string
	stats := newNemStats()
	if w != nil {
		w.m.mu.Lock()
		found = append(found, w.m.violations...)
		w.m.mu.Unlock()
		stats = w.stats
	}
	tb.mu.Lock()
	found = append(found, tb.failures...)
	logs := tb.logs
	tb.mu.Unlock()
	stats.Schedules = 1
	stats.Seconds = time.Since(began).Seconds()
	os.RemoveAll(tb.dir)
	return found, stats, logs
}

// shrink drops steps, halves first and then one at a time, keeping every
// shorter schedule that still fails, until none does or the budget is spent.
func shrink(t *testing.T, s nemSchedule, budget time.Duration) (nemSchedule, int) {
	end := time.Now().Add(budget)
	runs := 0
	cur := s
	for chunk := len(cur.Steps) / 2; chunk >= 1 && time.Now().Before(end); chunk /= 2 {
		for i := 0; i+chunk <= len(cur.Steps) && time.Now().Before(end); {
			cand := cur
			cand.Steps = append(append([]nemStep{}, cur.Steps[:i]...), cur.Steps[i+chunk:]...)
			if len(cand.Steps) == 0 {
				i += chunk
				continue
			}
			found, _, _ := execute(t, cand)
			runs++
			if len(found) > 0 {
				t.Logf("shrink: %d steps still fail: %s", len(cand.Steps), formatSteps(cand.Steps))
				cur = cand
			} else {
				i += chunk
			}
		}
	}
	return cur, runs
}

// The nemesis: from a seed, a schedule of traffic, process faults and
// operator actions against one topology (nemTopos: the embedded default,
// run --nats to a nats-server process, the edge with a hub, a 3-node
// cluster with partitions, the NATS sink, the embedded host on a disk that
// loses power, an idempotent destination), then a drain and one checker
// over everything the stream acked and the destination holds (nemCheck). A
// failing schedule is shrunk and printed with the command that replays it.
// The short profile runs a fixed seed on each topology and two from the
// clock; JETLEDGER_NEMESIS=long runs 200 schedules over them all (give go
// test -timeout 0: they take longer than its default 10 minutes).
func TestNemesis(t *testing.T) {
	prof := nemProfileFromEnv(t)
	var scheds []nemSchedule
	switch {
	case *nemStepsFlag != "":
		steps, err := parseSteps(*nemStepsFlag)
		if err != nil {
			t.Fatalf("-nemesis.steps: %v", err)
		}
		topo := *nemTopoFlag
		if topo == "" {
			topo = topologyOf(*nemSeedFlag)
		}
		scheds = []nemSchedule{{Seed: *nemSeedFlag, Topo: topo, Steps: steps}}
	case *nemSeedFlag != 0:
		topo := *nemTopoFlag
		if topo == "" {
			topo = topologyOf(*nemSeedFlag)
		}
		scheds = []nemSchedule{scheduleOf(*nemSeedFlag, topo, prof.Steps)}
	default:
		timeSeed := uint64(time.Now().UnixNano())
		// Seeds 1…n fall on each of the n topologies once (topologyOf).
		var base []uint64
		for i := range nemTopos() {
			base = append(base, uint64(i+1))
		}
		t.Logf("nemesis %s profile: fixed seeds 1…%d (one per topology), then time-derived seeds from %d", prof.Name, len(base), timeSeed)
		for i := 0; len(base) < prof.Schedules; i++ {
			base = append(base, timeSeed+uint64(i))
		}
		for _, seed := range base[:prof.Schedules] {
			scheds = append(scheds, scheduleOf(seed, topologyOf(seed), prof.Steps))
		}
	}
	total := newNemStats()
	began := time.Now()
	failed := 0
	for _, s := range scheds {
		found, stats, logs := execute(t, s)
		total.add(stats)
		t.Logf("schedule seed=%d topology=%s steps=%d: %d findings, %.1fs: %s", s.Seed, s.Topo, len(s.Steps), len(found), stats.Seconds, formatSteps(s.Steps))
		if os.Getenv("JETLEDGER_NEMESIS_VERBOSE") != "" {
			t.Logf("its log:\n  %s", strings.Join(logs, "\n  "))
		}
		if len(found) == 0 {
			continue
		}
		failed++
		t.Errorf("nemesis schedule seed=%d topology=%s failed after %s:\n  %s", s.Seed, s.Topo, time.Since(began).Round(time.Second), strings.Join(found, "\n  "))
		t.Logf("its log:\n  %s", strings.Join(logs, "\n  "))
		if *nemStepsFlag == "" || len(s.Steps) > 1 {
			shrunk, runs := shrink(t, s, prof.Shrink)
			again, _, _ := execute(t, shrunk)
			t.Errorf("shrunk in %d runs from %d to %d steps (seed %d, %s after the start); it fails with:\n  %s\nreplay it: %s",
				runs, len(s.Steps), len(shrunk.Steps), s.Seed, time.Since(began).Round(time.Second), strings.Join(again, "\n  "), shrunk.replay())
		}
		if prof.StopFirst {
			break
		}
	}
	report(t, "nemesis report", prof, failed, total, began)
}

// report logs a nemesis run's figures as JSON, titled what, and writes
// them to JETLEDGER_NEMESIS_REPORT when it names a file.
func report(t *testing.T, what string, prof nemProfile, failed int, total *nemStats, began time.Time) {
	t.Helper()
	total.Seconds = time.Since(began).Seconds()
	out, _ := json.MarshalIndent(struct {
		Profile nemProfile `json:"profile"`
		Failed  int        `json:"failed_schedules"`
		*nemStats
	}{prof, failed, total}, "", "  ")
	t.Logf("%s:\n%s", what, out)
	if path := os.Getenv("JETLEDGER_NEMESIS_REPORT"); path != "" {
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Error(err)
		}
	}
}
