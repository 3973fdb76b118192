package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats.go/jetstream"
)

// Helper-29's attacks on a plain run's lease as its commit path's fence
// (e38057d: ledger.Config.Fence = lease.Fence, a batch refused by it is
// naked back).

const h29LeaseStream = "KV_" + changelog.LeaseBucket

// h29LeaseSubject is the lease key's subject of the world's durable.
const h29LeaseSubject = "$KV." + changelog.LeaseBucket + "." + stream + ".jetledger"

// h29Holder reads who holds the durable's lease ("" nobody) and its TTL.
func h29Holder(js jetstream.JetStream) (string, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, h29LeaseStream)
	if err != nil {
		return "", 0, err
	}
	m, err := s.GetLastMsgForSubject(ctx, h29LeaseSubject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, err
	}
	if m.Header.Get("KV-Operation") != "" || m.Header.Get(jetstream.MarkerReasonHeader) != "" {
		return "", 0, nil
	}
	ttl, _ := time.ParseDuration(m.Header.Get("Jetledger-Lease-TTL"))
	return string(m.Data), ttl, nil
}

// h29Pid is the process id a run's lease name holds (host:pid:tag).
func h29Pid(holder string) int {
	parts := strings.Split(holder, ":")
	if len(parts) < 3 {
		return 0
	}
	pid, _ := strconv.Atoi(parts[len(parts)-2])
	return pid
}

// h29Fenced counts p's batches handed back by the fence.
func h29Fenced(p *proc) int {
	n := 0
	p.record(func(r map[string]any) bool {
		if m, _ := r["msg"].(string); strings.Contains(m, "lease was not held at the commit") {
			n++
		}
		return false
	})
	return n
}

// h29Sent is what the stream holds of evs once the paced publisher is
// done: an uncertain publish is published again (a no-op if it landed).
func h29Sent(w *world, pubs *publishes, evs []event) []event {
	var sent []event
	for _, e := range evs {
		if _, ok := pubs.uncertain[e.ID]; ok {
			w.publish([]event{e})
		}
		_, p := pubs.published[e.ID]
		_, u := pubs.uncertain[e.ID]
		if p || u {
			sent = append(sent, e)
		}
	}
	return sent
}

// (a) A plain run on a 3-node cluster under traffic while the lease
// bucket's leader is stepped down, the node that leads it is SIGKILLed and
// restarted, and the bucket is deleted, round after round: the run rides
// it out (its fence hands batches back while the lease is not held), exits
// 0 on SIGTERM, and applies every event exactly once.
func TestAttackH29PlainRunRidesOutLeaseBucketFailovers(t *testing.T) {
	t.Parallel()
	prof := clusterProfileFromEnv()
	c := startCluster(t)
	w := c.newWorld(t)
	rng := randFor(t)
	metrics := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	run := start(t, nil, c.runArgs(w, "--metrics", metrics, "--prune-interval", "0")...)
	consumertest.Eventually(t, time.Minute, "run healthy", func() bool { return healthz(metrics) == http.StatusOK })
	c.waitHealthy(time.Minute, stream, "jetledger")
	consumertest.Eventually(t, time.Minute, "the lease bucket with a leader and 3 current replicas", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s, err := c.js.Stream(ctx, h29LeaseStream)
		return err == nil && replicated(s.CachedInfo().Cluster, 3)
	})
	db := w.ledgerDB()

	kinds := []string{"stepdown", "restart", "stepdown", "restart", "delete", "stepdown", "restart"}
	if prof.Name == "long" {
		kinds = append(kinds, kinds...)
	}
	evs := makeEvents(rng, w.pub, 5000*len(kinds)) // more than the rounds take: stopped after the last
	stop := make(chan struct{})
	pubs, pubDone := publishPaced(context.Background(), w.pub, evs, 10*time.Millisecond, stop)
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
			<-pubDone
		}
	}()
	exited := func(what string) {
		select {
		case <-run.done:
			t.Fatalf("run exited (%s):\n%s", what, run.output())
		default:
		}
	}
	for round, kind := range kinds {
		var victim int
		consumertest.Eventually(t, time.Minute, "the lease bucket led", func() bool {
			exited("waiting for the lease bucket's leader")
			victim = c.leaderOf(h29LeaseStream)
			return victim >= 0
		})
		applied := count(t, db, `SELECT count(*) FROM processed_messages`)
		at := time.Now()
		switch kind {
		case "stepdown":
			// Several in a row, a renewal's quarter TTL apart and less.
			for range 3 {
				c.js.Conn().Request("$JS.API.STREAM.LEADER.STEPDOWN."+h29LeaseStream, nil, 2*time.Second) //nolint:errcheck // the next look tells
				time.Sleep(time.Duration(200+rng.IntN(600)) * time.Millisecond)
			}
		case "restart":
			c.kill(victim)
			time.Sleep(prof.Outage)
			c.restart(victim)
		case "delete":
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := c.js.DeleteKeyValue(ctx, changelog.LeaseBucket)
			cancel()
			if err != nil {
				t.Logf("round %d: delete the lease bucket: %v", round, err)
			}
		}
		consumertest.Eventually(t, 2*time.Minute, "run applying again", func() bool {
			exited(fmt.Sprintf("round %d, %s of %s", round, kind, c.nodes[victim].name))
			return count(t, db, `SELECT count(*) FROM processed_messages`) > applied+20
		})
		back := time.Since(at)
		if kind == "delete" {
			// The run's renewals write its key again in the bucket made
			// again: a key left empty while it commits could be taken by
			// another run once the made-again bucket's TTL is over.
			var seen string
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) {
				if seen, _, _ = h29Holder(c.js); h29Pid(seen) == run.cmd.Process.Pid {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if h29Pid(seen) != run.cmd.Process.Pid {
				t.Errorf("round %d: 10s after the lease bucket's deletion the key names %q, not the run that commits (pid %d)", round, seen, run.cmd.Process.Pid)
			} else {
				t.Logf("round %d: the key names the run again %v after the deletion", round, time.Since(at).Round(100*time.Millisecond))
			}
		}
		c.waitHealthy(2*time.Minute, stream, "jetledger")
		consumertest.Eventually(t, 2*time.Minute, "the lease bucket whole again", func() bool {
			exited("the lease bucket whole again")
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			s, err := c.js.Stream(ctx, h29LeaseStream)
			return err == nil && replicated(s.CachedInfo().Cluster, 3)
		})
		holder, _, err := h29Holder(c.js)
		t.Logf("round %d: %s (lease bucket led by %s): applying again after %v; key names %q (%v); fenced so far %d",
			round, kind, c.nodes[victim].name, back.Round(100*time.Millisecond), holder, err, h29Fenced(run))
	}
	close(stop)
	<-pubDone
	sent := h29Sent(w, pubs, evs)
	c.waitDrained(run, 3*time.Minute)
	run.stop()
	if code := run.wait(time.Minute); code != 0 {
		t.Fatalf("run exited %d after SIGTERM, want 0\n%s", code, run.output())
	}
	w.checkExact(db, sent)
	totals := run.stopped()
	msgs := map[string]int{}
	run.record(func(r map[string]any) bool {
		if lvl, _ := r["level"].(string); lvl != "INFO" {
			m, _ := r["msg"].(string)
			msgs[lvl+": "+m]++
		}
		return false
	})
	t.Logf("the run's warnings and errors: %v", msgs)
	t.Logf("%d published (%d uncertain); applied %.0f, duplicates %.0f, batches %.0f; %d batches handed back by the fence",
		len(sent), len(pubs.uncertain), totals["applied"], totals["duplicates"], totals["batches"], h29Fenced(run))
}
