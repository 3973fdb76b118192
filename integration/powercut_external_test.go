package integration

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/integration/lazyfs"
	"github.com/nats-io/nats.go/jetstream"
)

// Power cuts of the ledger alone, with the JetStream store on a durable
// disk (a separate nats-server, as on a host whose server is elsewhere):
// the server keeps every ack run sent, so a batch acked before its commit
// is on disk is lost for sure when the cut takes the commit back. A slow
// disk (SyncDelay) widens the window between commit and sync, which is
// where an ack-before-sync bug hides on a fast disk.
func TestPowerCutsLedgerExternalServer(t *testing.T) {
	cuts := powerCutsFromEnv(4)
	const delay = 5 * time.Millisecond
	rng := rand.New(rand.NewPCG(12, 12))
	b, w := newBrokerWorld(t)
	root := t.TempDir()
	backing, mnt := filepath.Join(root, "backing"), filepath.Join(root, "mnt")
	for _, d := range []string{backing, mnt} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	dbPath := filepath.Join(mnt, "ledger.db")
	args := append([]string{"run", "--nats", b.url(), "--db", dbPath, "--stream", stream, "--schema", w.schema,
		"--apply", balanceApply, "--log-format", "json", "--batch", "50", "--max-deliver", "-1"}, fastPlan...)

	evs := makeEvents(rng, w.pub, 200000)
	stop := make(chan struct{})
	pubs, pubDone := publishPaced(context.Background(), w.pub, evs, time.Millisecond, stop)

	for cut := 0; cut < cuts; cut++ {
		fs := lazyfs.ServeForTest(t, backing, mnt, lazyfs.Options{SyncDelay: delay})
		run := start(t, nil, args...)
		time.Sleep(time.Duration(500+rng.IntN(1500)) * time.Millisecond)
		// A real power cut stops the disk and the CPU at once: an fsync
		// in flight does not complete. Cut, then kill.
		if err := fs.PowerCut(); err != nil {
			t.Fatal(err)
		}
		run.kill()
		t.Logf("ledger power cut %d", cut+1)
	}
	close(stop)
	<-pubDone
	lazyfs.ServeForTest(t, backing, mnt, lazyfs.Options{SyncDelay: delay})
	run := start(t, nil, args...)
	w.db = dbPath
	db := w.drainAndStop(run, 3*time.Minute)
	var rep soakReport
	checkSoak(t, db, nil, pubs.published, pubs.uncertain, &rep)
	t.Logf("%d ledger power cuts (sync delay %s): %d published, %d uncertain, %d applied, %d lost, %d applied twice",
		cuts, delay, rep.Published, rep.Uncertain, rep.Applied, rep.Lost, rep.AppliedTwice)
	if rep.Published == 0 {
		t.Fatal("nothing published")
	}
	if rep.Lost != 0 || rep.AppliedTwice != 0 {
		t.Fatalf("%d lost, %d applied twice", rep.Lost, rep.AppliedTwice)
	}
}

// checkStreamApplied: every message the stream holds, whatever the
// publisher saw, is in the ledger (run has acked all of them).
func checkStreamApplied(t *testing.T, js jetstream.JetStream, db *sql.DB) {
	t.Helper()
	ctx := context.Background()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	state := st.CachedInfo().State
	ids := map[string]bool{}
	for seq := state.FirstSeq; seq <= state.LastSeq && state.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		ids[m.Header.Get(jetstream.MsgIDHeader)] = true
	}
	if len(ids) != int(state.Msgs) {
		t.Fatalf("read %d distinct ids of the stream's %d messages", len(ids), state.Msgs)
	}
	missing := 0
	for id := range ids {
		if count(t, db, `SELECT count(*) FROM processed_messages WHERE message_id = ?`, id) == 0 {
			missing++
		}
	}
	t.Logf("stream holds %d messages; %d of them not in the ledger", len(ids), missing)
	if missing > 0 {
		t.Errorf("%d messages in the stream, acked by run, never applied", missing)
	}
}
