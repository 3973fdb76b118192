package service

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/natsconn"
	"github.com/nats-io/nats-server/v2/server"
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

// ownedPair starts owner a and standby b of the test partition, each with
// plan (zero: the default), publishes n messages and waits until b's copy
// holds them.
func ownedPair(t *testing.T, srv *server.Server, js jetstream.JetStream, plan ackwait.Plan, n int) (a, b *ownedHost) {
	t.Helper()
	a, b = newOwnedHost(t, srv.ClientURL(), "a", 0), newOwnedHost(t, srv.ClientURL(), "b", 0)
	a.cfg.Consumer.Plan, b.cfg.Consumer.Plan = plan, plan
	a.start()
	consumertest.Eventually(t, time.Minute, "a owns the partition", func() bool { return hasSnapshot(t, js) })
	b.start()
	publish(t, js, 0, n)
	consumertest.Eventually(t, time.Minute, fmt.Sprintf("b's copy holds %d", n), func() bool { return processed(t, b.cfg.DB) == n })
	return a, b
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

// Issue 42, item 11: a table added by the run's schema, upgraded
// standby-first. The standby runs the new schema; the owner, still on the
// old one, is stopped and the standby owns the partition, writing the new
// table; the old owner comes back with the new schema as a standby: its
// copy, the file it owned, gets the new table from its own schema when it
// opens and follows the new owner's entries into it. Before, a standby
// never ran its schema on its copy, and stopped at the first entry
// writing the table (ErrChangesDoNotFit).
func TestAStandbyRunsItsSchemaOnItsCopy(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	const v1 = `CREATE TABLE IF NOT EXISTS a (id TEXT PRIMARY KEY);`
	const v2 = v1 + `CREATE TABLE IF NOT EXISTS b (id TEXT PRIMARY KEY);`
	a, b := newOwnedHost(t, srv.ClientURL(), "a", 0), newOwnedHost(t, srv.ClientURL(), "b", 0)
	a.cfg.SQL.Schema, a.cfg.SQL.Apply = v1, `INSERT INTO a VALUES (:msg_id)`
	b.cfg.SQL.Schema, b.cfg.SQL.Apply = v2, `INSERT INTO a VALUES (:msg_id); INSERT INTO b VALUES (:msg_id)`
	a.start()
	consumertest.Eventually(t, time.Minute, "a owns the partition", func() bool { return hasSnapshot(t, js) })
	b.start()
	publish(t, js, 0, 10)
	consumertest.Eventually(t, time.Minute, "b's copy holds 10", func() bool { return processed(t, b.cfg.DB) == 10 })
	a.halt() // b owns the partition, with the new schema
	publish(t, js, 10, 20)
	consumertest.Eventually(t, time.Minute, "b commits 20", func() bool { return processed(t, b.cfg.DB) == 20 })
	a.cfg.SQL = b.cfg.SQL
	a.start()
	publish(t, js, 20, 30)
	consumertest.Eventually(t, time.Minute, "a's copy follows into the new table", func() bool {
		select {
		case err := <-a.done:
			t.Fatalf("the upgraded standby stopped: %v", err)
		default:
		}
		return processed(t, a.cfg.DB) == 30 && rows(t, a.cfg.DB, "b") == 20
	})
	a.halt()
	b.halt()
}

// rows counts a table's rows (-1 if it cannot be read).
func rows(t *testing.T, file, table string) int {
	db, err := sql.Open("sqlite", "file:"+filepath.ToSlash(file)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n := -1
	_ = db.QueryRow(`SELECT count(*) FROM ` + table).Scan(&n)
	return n
}

// Issue 42, item 13: a standby whose copy cannot apply its log (here: the
// owner writes a table the standby's schema lacks) does not stop, does not
// take the partition over, and says so where a person looks: the gauge
// jetledger_changelog_waiting is 1 and /healthz is unhealthy. Before, it
// said "cannot reach its log or its lease" each second and looked healthy.
func TestAStandbyThatCannotApplyItsLogIsUnhealthy(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	a, b := newOwnedHost(t, srv.ClientURL(), "a", 0), newOwnedHost(t, srv.ClientURL(), "b", 0)
	a.cfg.SQL.Schema, a.cfg.SQL.Apply = `CREATE TABLE IF NOT EXISTS b (id TEXT PRIMARY KEY)`, `INSERT INTO b VALUES (:msg_id)`
	listen := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		b.cfg.Metrics = l
		return "http://" + l.Addr().String()
	}
	base := listen()
	a.start()
	consumertest.Eventually(t, time.Minute, "a owns the partition", func() bool { return hasSnapshot(t, js) })
	publish(t, js, 0, 5) // b's snapshot will hold table b: the owner's schema made it
	consumertest.Eventually(t, time.Minute, "a commits 5", func() bool { return processed(t, a.cfg.DB) == 5 })
	b.start()
	waitGauges(t, base+"/metrics", "jetledger_changelog_owner 0")
	// The standby's copy loses the table (a disk restored from an old
	// backup, say): the owner's next entries do not fit it.
	consumertest.Eventually(t, time.Minute, "b's copy holds 5", func() bool { return processed(t, b.cfg.DB) == 5 })
	b.halt()
	dropTable(t, b.cfg.DB, "b")
	base = listen() // the first closed with its run
	b.start()
	publish(t, js, 5, 10)
	waitGauges(t, base+"/metrics", "jetledger_changelog_waiting 1", `jetledger_changelog_role{role="waiting"} 1`)
	if code := healthCode(t, base+"/healthz"); code == http.StatusOK {
		t.Fatalf("/healthz of a standby that cannot apply its log: %d, want unhealthy", code)
	}
	select {
	case err := <-b.done:
		t.Fatalf("the standby stopped: %v", err)
	default:
	}
	a.halt()
	b.halt()
}

func dropTable(t *testing.T, file, table string) {
	db, err := sql.Open("sqlite", "file:"+filepath.ToSlash(file))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`DROP TABLE ` + table); err != nil {
		t.Fatal(err)
	}
}

func healthCode(t *testing.T, url string) int {
	resp, err := http.Get(url) //nolint:noctx // a test's probe
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Issue 42, item 10: the changelog purged while a standby is behind it.
// The standby waits (no loop of restores), the owner notices that its log
// lacks entries after its snapshot and stores a new one at once, and the
// standby's copy goes on from it. Before, standbys restored the old
// snapshot hundreds of times a second, and the next snapshot came after
// SnapshotInterval (10 minutes).
func TestAPurgedChangelogIsBridgedByASnapshot(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	a, b := ownedPair(t, srv, js, ackwait.Plan{}, 20)
	b.halt()
	publish(t, js, 20, 40)
	consumertest.Eventually(t, time.Minute, "a commits 40", func() bool { return processed(t, a.cfg.DB) == 40 })
	name, _ := changelog.Names("S", "d")
	s, err := js.Stream(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.start()
	consumertest.Eventually(t, time.Minute, "b's copy, from the owner's new snapshot, holds 40", func() bool {
		select {
		case err := <-b.done:
			t.Fatalf("the standby stopped: %v", err)
		default:
		}
		return processed(t, b.cfg.DB) == 40
	})
	a.halt()
	b.halt()
}

// An owner whose first snapshot cannot be stored (its bucket out of
// storage: here a stream in its place answering none of its subjects)
// consumes nothing, and says so where a person looks: the gauge
// jetledger_changelog_waiting is 1 and /healthz unhealthy until the
// snapshot is stored; then it owns and consumes (issue 43: an owner
// without its first snapshot needs a person).
func TestAnOwnerWithoutItsFirstSnapshotSaysSo(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	broken := "OBJ_" + changelog.SnapshotBucket
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: broken, Subjects: []string{"nothing.here"}}); err != nil {
		t.Fatal(err)
	}
	a := newOwnedHost(t, srv.ClientURL(), "a", 0)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a.cfg.Metrics = l
	base := "http://" + l.Addr().String()
	a.start()
	waitGauges(t, base+"/metrics", "jetledger_changelog_waiting 1", `jetledger_changelog_role{role="taking"} 1`)
	if code := healthCode(t, base+"/healthz"); code == http.StatusOK {
		t.Fatalf("/healthz of an owner without its first snapshot: %d, want unhealthy", code)
	}
	if err := js.DeleteStream(t.Context(), broken); err != nil {
		t.Fatal(err)
	}
	waitGauges(t, base+"/metrics", "jetledger_changelog_waiting 0", `jetledger_changelog_role{role="owner"} 1`)
	publish(t, js, 0, 5)
	consumertest.Eventually(t, time.Minute, "a owns and commits 5", func() bool { return processed(t, a.cfg.DB) == 5 })
	a.halt()
}
