package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/health"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/node"
	"github.com/jetledger/jetledger/service"
	"github.com/nats-io/nats.go/jetstream"
)

// getHealth asks /healthz and returns its code and body.
func getHealth(t *testing.T, url string) (int, health.Report) {
	t.Helper()
	resp, err := http.Get(url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h health.Report
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, h
}

// A full disk under the embedded store and the ledger turns /healthz 503
// with each check's state (never an error text with paths); the first
// write the store cannot make is a failure the server keeps, which the
// watch of run returns, so that run exits for its supervisor to restart.
func TestHealthzAndStoreWatchOnAFullDisk(t *testing.T) {
	t.Parallel()
	dir := consumertest.SmallDisk(t, 32<<20)
	e, err := startEmbedded(t.Context(), node.Config{Listen: "127.0.0.1:0", StoreDir: filepath.Join(dir, "nats"), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	st, err := ledger.Open(filepath.Join(dir, "l.db"), ledger.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	nc, js, err := connect(context.Background(), natsFlags{URL: e.ClientURL()}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	hh, err := health.New(health.Config{Logger: quiet}, health.NATS(nc), health.Database(st), service.StoreProbe(e))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(hh)
	t.Cleanup(srv.Close)
	publish := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_, err := js.Publish(ctx, "s.x", make([]byte, 4096))
		return err
	}
	if err := publish(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if code, h := getHealth(t, srv.URL); code != http.StatusOK || !h.Healthy || h.Checks["store"] != health.StateOK || h.Checks["database"] != health.StateOK {
		t.Fatalf("/healthz with room: %d %+v", code, h)
	}

	watchCtx, stopWatch := context.WithCancel(context.Background())
	watched := make(chan error, 1)
	go func() { watched <- service.Watch(watchCtx, e, 10*time.Millisecond, quiet) }()
	t.Cleanup(func() { stopWatch(); <-watched })

	free := consumertest.FillDisk(t, dir)
	var h health.Report
	consumertest.Eventually(t, 30*time.Second, "/healthz 503 with the disks full", func() bool {
		var code int
		code, h = getHealth(t, srv.URL)
		return code == http.StatusServiceUnavailable && !h.Healthy && h.Checks["database"] == health.StateDiskFull && h.Checks["store"] == health.StateDiskFull
	})
	if h.Checks["nats"] != health.StateOK {
		t.Fatalf("nats %q, want ok: the server still serves", h.Checks["nats"])
	}
	select {
	case err := <-watched:
		t.Fatalf("the watch returned %v before the store failed a write", err)
	default:
	}
	// Until a publish needs the disk the store has failed nothing; the
	// first that does is never acknowledged.
	consumertest.Eventually(t, 30*time.Second, "a publish the store cannot write", func() bool { return publish(time.Second) != nil })
	var werr error
	select {
	case werr = <-watched:
	case <-time.After(30 * time.Second):
		t.Fatal("the watch did not see the store fail within 30s")
	}
	watched <- werr // for the cleanup
	if !errors.Is(werr, node.ErrStoreFailed) {
		t.Fatalf("watch: %v, want node.ErrStoreFailed", werr)
	}
	free()
	// The database takes writes again; the server keeps the store's
	// failure until it restarts, which is why run exits.
	consumertest.Eventually(t, 30*time.Second, "database ok and the store still failed", func() bool {
		var code int
		code, h = getHealth(t, srv.URL)
		return code == http.StatusServiceUnavailable && h.Checks["database"] == health.StateOK && h.Checks["store"] == health.StateWriteFailed
	})
	for name, state := range h.Checks {
		if !slices.Contains(health.States, state) {
			t.Errorf("check %s: %q is not a state", name, state)
		}
	}
}

// --db-max-size takes units; a plain number is bytes. A cap below what a
// new ledger needs is a usage error, before anything is created.
func TestDBMaxSizeTakesUnits(t *testing.T) {
	t.Parallel()
	for arg, want := range map[string]byteSize{"8MiB": 8 << 20, "1GB": 1000 * 1000 * 1000, "400000": 400000} {
		root, err := parseArgs("run", "--db-max-size", arg)
		if err != nil {
			t.Fatalf("--db-max-size %s: %v", arg, err)
		}
		if got := root.Run.DBMaxSize; got != want {
			t.Fatalf("--db-max-size %s = %d, want %d", arg, got, want)
		}
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "l.db")
	for _, arg := range []string{"64KiB", "-1", "lots"} {
		if code, _, stderr := runMain("run", "--db", db, "--listen", "127.0.0.1:0", "--db-max-size", arg); code != exitUsage {
			t.Fatalf("--db-max-size %s: exit %d, want %d\n%s", arg, code, exitUsage, stderr)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("a refused --db-max-size left %d files behind (%s...)", len(left), left[0].Name())
	}
}
