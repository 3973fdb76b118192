package integration

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A group upgraded one host at a time from an older build (ATTACK3_OLD_BINS,
// as the owned pair's upgrade tests: build one with `git worktree add
// /tmp/old <commit>` and `go build -o /tmp/old-jetledger/bin/jetledger
// ./cmd/jetledger` there): three hosts of the old binary under traffic, each
// in turn SIGTERMed (exit 0) and started again on this build in its own
// directory, the group settled with it before the next, old and new side by
// side meanwhile; then a fourth host of this build joins. Every event is
// applied once, no partition is without an owner for long, and group status
// says every partition owned. Behind JETLEDGER_CLUSTER=long.
func TestGroupRollingUpgradeFromAnOlderBuild(t *testing.T) {
	h30Long(t)
	for _, old := range oldBins(t) {
		t.Run(filepath.Base(filepath.Dir(filepath.Dir(old))), func(t *testing.T) {
			g := newGroupWorld(t, 8)
			live := []int{0, 1, 2}
			for range live {
				g.joinWith(old, t.TempDir(), g.n, 1)
			}
			g.settled(3*time.Minute, time.Time{}, live...)
			free := g.watchUnowned()
			evs := makeEvents(randFor(t), g.pub, 800)
			g.publish(evs[:200])
			var at time.Time
			for i, h := range []int{0, 1, 2} {
				g.hosts[h].p.signal(syscall.SIGTERM)
				if code := g.hosts[h].p.wait(2 * time.Minute); code != 0 {
					t.Fatalf("old host %d exited %d after SIGTERM:\n%s", h, code, tailH30(g.hosts[h].p.output(), 40))
				}
				at = time.Now()
				g.joinIn(g.hosts[h].dir, g.n, 1)
				live = replaceH30(live, h, len(g.hosts)-1)
				g.publish(evs[200+i*150 : 350+i*150])
				g.settled(3*time.Minute, at, live...)
				t.Logf("host %d upgraded: settled %v after its start", h, time.Since(at).Round(time.Millisecond))
			}
			at = time.Now()
			g.join()
			live = append(live, len(g.hosts)-1)
			g.publish(evs[650:])
			held := g.settled(3*time.Minute, at, live...)
			g.h30End(held, evs, free, live...)
		})
	}
}
