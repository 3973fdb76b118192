package integration

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
)

// Moving a partition to another host: the old owner stops, its ledger is
// copied with `jetledger ledger backup`, and a new owner runs on the copy in
// another directory, against the same stream and durable. These tests check
// that nothing is lost and nothing applied twice across the move.

// ownerDir is one owner's directory, a host of its own: its ledger and
// schema file.
type ownerDir struct {
	db, schema string
}

func newOwnerDir(t *testing.T) ownerDir {
	t.Helper()
	dir := t.TempDir()
	h := ownerDir{db: filepath.Join(dir, "ledger.db"), schema: filepath.Join(dir, "schema.sql")}
	if err := os.WriteFile(h.schema, []byte(balanceTable), 0o600); err != nil {
		t.Fatal(err)
	}
	return h
}

// runOwner starts `jetledger run` on h's ledger, connected to the world's
// server, on the stream and the durable every owner shares.
func (w *world) runOwner(h ownerDir, env []string, extra ...string) *proc {
	w.t.Helper()
	args := append([]string{"run", "--nats", w.srv.ClientURL(), "--db", h.db, "--stream", stream,
		"--schema", h.schema, "--apply", balanceApply, "--log-format", "json"}, fastPlan...)
	return start(w.t, env, append(args, extra...)...)
}

// backupOut is what `ledger backup --json` prints.
type backupOut struct {
	From      string           `json:"from"`
	Path      string           `json:"path"`
	SizeBytes int64            `json:"size_bytes"`
	Rows      int64            `json:"rows"`
	Tables    map[string]int64 `json:"tables"`
}

// runBackup runs `jetledger ledger backup` and returns what it printed.
func runBackup(t *testing.T, from, to string) backupOut {
	t.Helper()
	cmd := exec.Command(binPath, "ledger", "backup", "--db", from, "--to", to, "--json")
	cmd.Env = testEnviron()
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("ledger backup: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var b backupOut
	if err := json.Unmarshal(out, &b); err != nil {
		t.Fatalf("ledger backup printed no JSON: %v\n%s", err, out)
	}
	return b
}

// openReadOnly opens a ledger with mode=ro: such a connection never
// checkpoints the WAL (not even when it is the last to close), so the tests
// can read a ledger without moving what its WAL holds into the main file.
func openReadOnly(t *testing.T, file string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+file+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// checkBackupCopy opens a copy and checks it is whole (integrity_check), not
// world-readable, and its state and ledger rows are from one moment.
func checkBackupCopy(t *testing.T, file string) *sql.DB {
	t.Helper()
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("copy %s has mode %v, want 0600", file, fi.Mode().Perm())
	}
	db := openReadOnly(t, file)
	var verdict string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&verdict); err != nil || verdict != "ok" {
		t.Fatalf("integrity_check of the copy: %q, %v", verdict, err)
	}
	if n := count(t, db, `SELECT count(*) FROM events e WHERE NOT EXISTS (SELECT 1 FROM processed_messages p WHERE p.message_id = e.message_id)`); n != 0 {
		t.Fatalf("copy: %d events rows without their processed_messages row", n)
	}
	if n := count(t, db, `SELECT count(*) FROM processed_messages p WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.message_id = p.message_id)`); n != 0 {
		t.Fatalf("copy: %d processed_messages rows without their events row", n)
	}
	// The balances are the sum of the events the copy holds: state and
	// ledger come from the same transaction.
	if b, e := count(t, db, `SELECT coalesce(sum(amount), 0) FROM balances`),
		count(t, db, `SELECT coalesce(sum(json_extract(data, '$.amount')), 0) FROM events`); b != e {
		t.Fatalf("copy: balances sum to %d, its events to %d", b, e)
	}
	return db
}

// The documented hand-over: SIGTERM the old owner, back its ledger up to
// the new host, start the new owner on the copy. Messages published before,
// during and after the move are each applied once, on the new host.
func TestHandoverAfterSIGTERM(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Minute)
	evs := makeEvents(randFor(t), w.pub, 5000)
	before, during, after := evs[:3000], evs[3000:4000], evs[4000:]
	w.publish(before)

	a, b := newOwnerDir(t), newOwnerDir(t)
	old := w.runOwner(a, nil, "--batch", "50")
	dbA := openReadOnly(t, a.db)
	consumertest.Eventually(t, time.Minute, "the old owner under way", func() bool {
		var n int
		return dbA.QueryRow(`SELECT count(*) FROM processed_messages`).Scan(&n) == nil && n >= 500
	})
	old.stop()
	if code := old.wait(30 * time.Second); code != 0 {
		t.Fatalf("old owner exited %d after SIGTERM, want 0", code)
	}
	appliedA := count(t, dbA, `SELECT count(*) FROM processed_messages`)
	if info := w.consumerInfo(); info.NumAckPending != 0 || info.AckFloor.Stream != uint64(appliedA) {
		t.Fatalf("after SIGTERM: %d applied, ack floor %d, %d pending; want every applied message acked", appliedA, info.AckFloor.Stream, info.NumAckPending)
	}
	if appliedA >= len(before) {
		t.Fatalf("the old owner applied all %d before SIGTERM; the test needs a stop mid-stream", appliedA)
	}

	t.Logf("the old owner applied %d of %d before SIGTERM", appliedA, len(before))
	w.publish(during) // nobody owns the partition now
	out := runBackup(t, a.db, b.db)
	if out.Tables["processed_messages"] != int64(appliedA) {
		t.Fatalf("backup copied %d processed_messages rows, want %d", out.Tables["processed_messages"], appliedA)
	}
	checkBackupCopy(t, b.db)

	owner := w.runOwner(b, nil, "--batch", "50")
	w.publish(after)
	w.finish(owner, 2*time.Minute)
	totals := owner.stopped()
	if int(totals["duplicates"]) != 0 || int(totals["applied"]) != len(evs)-appliedA {
		t.Fatalf("new owner: %v applied, %v duplicates; want %d and 0", totals["applied"], totals["duplicates"], len(evs)-appliedA)
	}
	w.checkExact(openReadOnly(t, b.db), evs)
}

// The old owner dies between a commit and its acks (SIGKILL at the fault
// point), its last commits still only in the WAL. The backup of the dead
// owner's ledger has them: on the new host the redelivered batch is all
// duplicates, the acked messages before it are not lost, and the rest is
// applied once.
func TestHandoverAfterOwnerDiedBetweenCommitAndAck(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Minute)
	evs := makeEvents(randFor(t), w.pub, 1000)
	acked, rest := evs[:400], evs[400:]
	a, b := newOwnerDir(t), newOwnerDir(t)

	first := w.runOwner(a, nil, "--batch", "50")
	dbA := openReadOnly(t, a.db)
	// The first messages reach the main file (the owner checkpoints a
	// small WAL 30 ticks of a second after its last checkpoint)...
	w.publish(acked[:100])
	w.waitDrained(time.Minute)
	scratch := filepath.Join(t.TempDir(), "main-only.db")
	consumertest.Eventually(t, 90*time.Second, "a checkpoint of the first messages", func() bool {
		return mainFileRows(t, a.db, scratch) == 100
	})
	// ...then a reader whose snapshot holds only those keeps the owner's
	// checkpoints from copying anything newer: what the owner commits from
	// here on stays in the WAL, as its last second of commits would when it
	// is killed. The test holds it until the owner is dead.
	pin, err := dbA.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pin.ExecContext(context.Background(), `BEGIN`); err != nil {
		t.Fatal(err)
	}
	var pinned int
	if err := pin.QueryRowContext(context.Background(), `SELECT count(*) FROM processed_messages`).Scan(&pinned); err != nil || pinned != 100 {
		t.Fatalf("pinned at %d rows (%v), want 100", pinned, err)
	}

	w.publish(acked[100:])
	w.waitDrained(time.Minute)
	first.stop()
	if code := first.wait(30 * time.Second); code != 0 {
		t.Fatalf("old owner exited %d after SIGTERM, want 0", code)
	}
	w.publish(rest)
	crashed := w.runOwner(a, []string{"JETLEDGER_FAULT=after-commit"}, "--batch", "50")
	if code := crashed.wait(30 * time.Second); code != -1 {
		t.Fatalf("exit code %d, want death by SIGKILL", code)
	}
	// The pinned connection is read-only: closing it checkpoints nothing.
	pin.ExecContext(context.Background(), `ROLLBACK`) //nolint:errcheck // closed next
	pin.Close()
	committed := count(t, dbA, `SELECT count(*) FROM processed_messages`) - len(acked)
	if committed <= 0 || committed > 2*50 {
		t.Fatalf("the dead owner committed %d unacked messages, want one or two batches", committed)
	}
	if info := w.consumerInfo(); info.AckFloor.Stream != uint64(len(acked)) {
		t.Fatalf("ack floor %d after the crash, want %d", info.AckFloor.Stream, len(acked))
	}
	dbA.Close() // read-only: the WAL stays as the dead owner left it

	// The test is about the WAL: the main file alone lacks the last 300
	// acked messages and the unacked batch.
	if held := mainFileRows(t, a.db, scratch); held != 100 {
		t.Fatalf("the main file alone holds %d rows; the test needs 100, the rest in the WAL only", held)
	}
	fi, err := os.Stat(a.db + "-wal")
	if err != nil || fi.Size() == 0 {
		t.Fatalf("the dead owner's WAL: %v, %v; want it holding the last commits", fi, err)
	}
	t.Logf("the dead owner left %d acked and %d committed but unacked messages, %d of them in a WAL of %d bytes only",
		len(acked), committed, len(acked)+committed-100, fi.Size())

	out := runBackup(t, a.db, b.db)
	if want := int64(len(acked) + committed); out.Tables["processed_messages"] != want {
		t.Errorf("backup copied %d processed_messages rows, want %d: the WAL's commits", out.Tables["processed_messages"], want)
	}
	checkBackupCopy(t, b.db)

	owner := w.runOwner(b, nil, "--batch", "50")
	w.finish(owner, 2*time.Minute)
	totals := owner.stopped()
	if int(totals["duplicates"]) != committed || int(totals["applied"]) != len(rest)-committed {
		t.Errorf("new owner: %v applied, %v duplicates; want %d applied and the %d committed but unacked as duplicates",
			totals["applied"], totals["duplicates"], len(rest)-committed, committed)
	}
	w.checkExact(openReadOnly(t, b.db), evs)
}

// A backup taken while run applies a steady stream is one consistent
// moment: whole, every row with its partner, and between the counts seen
// just before and just after it.
func TestBackupWhileRunApplies(t *testing.T) {
	t.Parallel()
	w := newWorld(t, time.Minute)
	a, b := newOwnerDir(t), newOwnerDir(t)
	owner := w.runOwner(a, nil, "--batch", "50")
	dbA := openReadOnly(t, a.db)

	stop := make(chan struct{})
	pubs, done := publishPaced(context.Background(), w.pub, makeEvents(randFor(t), w.pub, 50000), time.Millisecond, stop)
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}()
	processed := func() int {
		var n int
		if err := dbA.QueryRow(`SELECT count(*) FROM processed_messages`).Scan(&n); err != nil {
			return -1
		}
		return n
	}
	consumertest.Eventually(t, time.Minute, "run applying", func() bool { return processed() >= 300 })

	before := processed()
	out := runBackup(t, a.db, b.db)
	afterCount := processed()
	close(stop)
	<-done
	if afterCount <= before {
		t.Fatalf("run applied nothing during the backup (%d rows before and after); the test needs it busy", before)
	}
	copied := count(t, checkBackupCopy(t, b.db), `SELECT count(*) FROM processed_messages`)
	if copied < before || copied > afterCount || int64(copied) != out.Tables["processed_messages"] {
		t.Fatalf("copy holds %d processed messages (printed %d); want between %d and %d", copied, out.Tables["processed_messages"], before, afterCount)
	}
	t.Logf("copy of %d rows taken while run went from %d to %d", copied, before, afterCount)

	if len(pubs.uncertain) != 0 {
		t.Fatalf("%d publishes uncertain", len(pubs.uncertain))
	}
	var published []event
	for _, e := range pubs.published {
		published = append(published, e)
	}
	w.finish(owner, 2*time.Minute)
	w.checkExact(dbA, published)
}

// mainFileRows copies the ledger's main file alone, without its WAL, to
// scratch and counts the processed messages it holds.
func mainFileRows(t *testing.T, file, scratch string) int {
	t.Helper()
	removeDatabase(scratch)
	copyMainFile(t, file, scratch)
	db, err := sql.Open("sqlite", scratch)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM processed_messages`).Scan(&n); err != nil {
		return 0 // not even the table yet
	}
	return n
}

func removeDatabase(file string) {
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(file + suffix)
	}
}

func copyMainFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
