package service

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/natsconn"
	"github.com/nats-io/nats.go/jetstream"
)

// ownedHost is one host's owned run of the test partition, restartable on
// its own directory.
type ownedHost struct {
	t    *testing.T
	cfg  Config
	stop context.CancelFunc
	done chan error
}

func newOwnedHost(t *testing.T, url, name string, snapshots time.Duration) *ownedHost {
	cfg := testConfig(t, t.TempDir())
	cfg.NATS = &natsconn.Config{URL: url}
	cfg.Owner = &Owner{Name: name, Standby: true, SnapshotInterval: snapshots}
	return &ownedHost{t: t, cfg: cfg}
}

func (h *ownedHost) start() {
	ctx, stop := context.WithCancel(h.t.Context())
	h.stop, h.done = stop, make(chan error, 1)
	go func() { h.done <- Run(ctx, h.cfg) }()
}

// halt stops the run (as a supervisor's SIGTERM) and wants it to end cleanly.
func (h *ownedHost) halt() {
	h.t.Helper()
	h.stop()
	if err := <-h.done; err != nil {
		h.t.Fatalf("%s's run: %v", h.cfg.Owner.Name, err)
	}
}

// files lists the host's ledger files, its own and any set aside.
func (h *ownedHost) files() []string {
	m, _ := filepath.Glob(h.cfg.DB + "*")
	return m
}

// Issue 42, item 4: the changelog stream is deleted under a running owner
// and its standby, and both are restarted as a supervisor would, the
// standby's host first. Nothing acknowledged is lost: the owner's file
// begins the new log (it holds the old snapshot and every acknowledged
// message), the standby's copy of the old log gives way to the new log's
// snapshot (set aside, not deleted), and at the end the partition's
// ledger holds every message once. Before: the standby deleted its file,
// the empty host began the new log and stored an empty snapshot over the
// good one: 20 of 50.
func TestDeletedChangelogThenRestartsLoseNothing(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	a, b := newOwnedHost(t, srv.ClientURL(), "a", 0), newOwnedHost(t, srv.ClientURL(), "b", 0)
	a.start()
	consumertest.Eventually(t, time.Minute, "a owns the partition", func() bool { return processed(t, a.cfg.DB) >= 0 && hasSnapshot(t, js) })
	b.start()
	publish(t, js, 0, 20)
	consumertest.Eventually(t, time.Minute, "b's copy holds 20", func() bool { return processed(t, b.cfg.DB) == 20 })

	name, _ := changelog.Names("S", "d")
	if err := js.DeleteStream(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	publish(t, js, 20, 50)
	consumertest.Eventually(t, 2*time.Minute, "the partition's owner commits 50", func() bool {
		return processed(t, a.cfg.DB) == 50 || processed(t, b.cfg.DB) == 50
	})
	b.halt()
	a.halt()
	b.start() // the supervisor brings the standby's host back first
	a.start()
	publish(t, js, 50, 60)
	consumertest.Eventually(t, 2*time.Minute, "the owner after the restarts commits 60, its standby's copy too", func() bool {
		return processed(t, a.cfg.DB) == 60 && processed(t, b.cfg.DB) == 60
	})
	a.halt()
	b.halt()
	for _, h := range []*ownedHost{a, b} {
		if _, err := os.Stat(h.cfg.DB); err != nil {
			t.Fatalf("%s's ledger: %v (files %v)", h.cfg.Owner.Name, err, h.files())
		}
	}
}

// hasSnapshot says whether the test partition's snapshot is stored.
func hasSnapshot(t *testing.T, js jetstream.JetStream) bool {
	obs, err := js.ObjectStore(t.Context(), changelog.SnapshotBucket)
	if err != nil {
		return false
	}
	name, _ := changelog.Names("S", "d")
	_, err = obs.GetInfo(t.Context(), name)
	return err == nil
}

// Issue 42, item 5: a replacement host, started with an empty disk after
// the owner is gone, restores the partition's snapshot and goes on from
// there, though the log was trimmed behind it; before, it replayed the log
// from entry 1 (refused: "the ledger needs a snapshot … holds entries
// from 2").
func TestReplacementHostRestoresTheSnapshot(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	a := newOwnedHost(t, srv.ClientURL(), "a", 200*time.Millisecond) // trims its log behind each snapshot
	a.start()
	for i := range 4 {
		publish(t, js, i*10, (i+1)*10)
		consumertest.Eventually(t, time.Minute, "a commits", func() bool { return processed(t, a.cfg.DB) == (i+1)*10 })
	}
	name, _ := changelog.Names("S", "d")
	consumertest.Eventually(t, time.Minute, "the log trimmed behind a snapshot", func() bool {
		s, err := js.Stream(t.Context(), name)
		return err == nil && s.CachedInfo().State.FirstSeq > 1
	})
	a.halt()
	if err := os.RemoveAll(filepath.Dir(a.cfg.DB)); err != nil { // the host is lost
		t.Fatal(err)
	}
	c := newOwnedHost(t, srv.ClientURL(), "c", 0)
	c.start()
	publish(t, js, 40, 50)
	consumertest.Eventually(t, 2*time.Minute, "the replacement commits all 50", func() bool { return processed(t, c.cfg.DB) == 50 })
	c.halt()
}
