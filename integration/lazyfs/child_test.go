package lazyfs_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	_ "modernc.org/sqlite"
)

// Programs under test run in child processes, the test binary re-executed
// in a role: they can then be SIGKILLed before the power cut, as a crash
// would, and SQLite's mmap of its -shm file never faults pages in the
// process that serves the mount.
const (
	childRoleEnv = "LAZYFS_CHILD_ROLE"
	childArgsEnv = "LAZYFS_CHILD_ARGS"
)

const (
	roleSQLiteWrite = "sqlite-write" // commit Rows rows, one per transaction
	roleSQLiteCount = "sqlite-count" // report the rows and the counter
	roleSQLiteIncr  = "sqlite-incr"  // increment the counter Rows times
	roleNATSPublish = "nats-publish" // publish Msgs acked messages
	roleNATSCount   = "nats-count"   // report the stream's messages
	roleLedgerApply = "ledger-apply" // apply Rows messages in pipelined batches
	roleLedgerCount = "ledger-count" // report the ledger's messages and events
)

// childArgs configure a child; fields are per role.
type childArgs struct {
	Dir         string `json:"dir"`         // working directory, on the mount
	Synchronous string `json:"synchronous"` // SQLite PRAGMA synchronous
	Rows        int    `json:"rows"`
	Msgs        int    `json:"msgs"`
	SyncAlways  bool   `json:"sync_always"` // nats-server Options.SyncAlways
	// SkipDurable reports pipelined batches acked without waiting for
	// Pending.Durable: the mechanism weakened, to show the test can fail.
	SkipDurable bool `json:"skip_durable"`
}

// report is one line a child writes on stdout.
type report struct {
	Event string `json:"event"` // "acked", "done", "count" or "error"
	N     int    `json:"n"`     // acked: rows or messages so far; count: rows or messages
	Last  int    `json:"last"`  // count: highest row id or stream sequence
	Value int    `json:"value"` // count: the SQLite counter
	Err   string `json:"err,omitempty"`
}

const (
	stream  = "ORDERS"
	subject = "orders.new"
)

// child is a running child process.
type child struct {
	cmd     *exec.Cmd
	reports chan report
	stdin   io.Closer

	once sync.Once
	rest []report // reports left unread when it was killed
}

// startChild runs the test binary in role with args.
func startChild(tb testing.TB, role string, args childArgs) *child {
	tb.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childRoleEnv+"="+role, childArgsEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	// The child waits on stdin for its kill; EOF ends it if the test dies.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	c := &child{cmd: cmd, reports: make(chan report, 1<<14), stdin: stdin}
	go func() {
		defer close(c.reports)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var r report
			if json.Unmarshal(sc.Bytes(), &r) == nil {
				c.reports <- r
			}
		}
	}()
	tb.Cleanup(func() { c.kill() })
	return c
}

// next returns the child's next report, failing the test at the deadline.
func (c *child) next(tb testing.TB, timeout time.Duration) report {
	tb.Helper()
	select {
	case r, ok := <-c.reports:
		if !ok {
			tb.Fatalf("%s exited before reporting", c.cmd.Args[0])
		}
		if r.Event == "error" {
			tb.Fatalf("child: %s", r.Err)
		}
		return r
	case <-time.After(timeout):
		tb.Fatalf("no report from the child within %v", timeout)
	}
	return report{}
}

// until reads reports until one satisfies ok.
func (c *child) until(tb testing.TB, timeout time.Duration, ok func(report) bool) report {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		r := c.next(tb, time.Until(deadline))
		if ok(r) {
			return r
		}
	}
}

// kill SIGKILLs the child and reaps it, and returns the reports it wrote
// and the test had not read. Once it returns, no process of the child holds
// a file on the mount.
func (c *child) kill() []report {
	c.once.Do(func() {
		_ = c.cmd.Process.Kill()
		_ = c.stdin.Close()
		for r := range c.reports {
			c.rest = append(c.rest, r)
		}
		_ = c.cmd.Wait()
	})
	return c.rest
}

// wait waits up to timeout for a child that exits by itself, and returns
// its reports.
func (c *child) wait(tb testing.TB, timeout time.Duration) []report {
	tb.Helper()
	_ = c.stdin.Close()
	deadline := time.After(timeout)
	var got []report
	for {
		select {
		case r, ok := <-c.reports:
			if !ok {
				c.once.Do(func() {})
				if err := c.cmd.Wait(); err != nil {
					tb.Fatalf("child: %v", err)
				}
				return got
			}
			if r.Event == "error" {
				tb.Fatalf("child: %s", r.Err)
			}
			got = append(got, r)
		case <-deadline:
			c.kill()
			tb.Fatalf("child still running after %v", timeout)
		}
	}
}

// lastAcked returns the highest acked count among reports.
func lastAcked(reports []report) int {
	n := 0
	for _, r := range reports {
		if r.Event == "acked" {
			n = max(n, r.N)
		}
	}
	return n
}

// runChild is the body of a child process; it returns the exit code.
func runChild(role string) int {
	var args childArgs
	if err := json.Unmarshal([]byte(os.Getenv(childArgsEnv)), &args); err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var err error
	switch role {
	case roleSQLiteWrite:
		err = sqliteWrite(ctx, args)
	case roleSQLiteCount:
		err = sqliteCount(ctx, args)
	case roleSQLiteIncr:
		err = sqliteIncr(ctx, args)
	case roleNATSPublish:
		err = natsPublish(ctx, args)
	case roleNATSCount:
		err = natsCount(ctx, args)
	case roleLedgerApply:
		err = ledgerApply(ctx, args)
	case roleLedgerCount:
		err = ledgerCount(ctx, args)
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		return fail(err)
	}
	return 0
}

func emit(r report) {
	raw, _ := json.Marshal(r)
	fmt.Println(string(raw))
}

func fail(err error) int {
	emit(report{Event: "error", Err: err.Error()})
	return 1
}

// awaitKill blocks until the parent kills the child (or dies: stdin EOF).
func awaitKill() {
	_, _ = io.Copy(io.Discard, os.Stdin)
}

func openDB(args childArgs) (*sql.DB, error) {
	sync := args.Synchronous
	if sync == "" {
		sync = "FULL"
	}
	dsn := filepath.Join(args.Dir, "test.db") + "?_txlock=immediate&_pragma=busy_timeout(20000)" +
		"&_pragma=journal_mode(WAL)&_pragma=synchronous(" + sync + ")"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

const schema = `
CREATE TABLE IF NOT EXISTS rows (id INTEGER PRIMARY KEY, payload TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL);
INSERT INTO counter (id, value) VALUES (1, 0) ON CONFLICT DO NOTHING;`

func sqliteWrite(ctx context.Context, args childArgs) error {
	db, err := openDB(args)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, schema); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	for i := range args.Rows {
		var id int
		err := db.QueryRowContext(ctx, `INSERT INTO rows (payload) VALUES (?) RETURNING id`,
			fmt.Sprintf("row %d of a durability test, padded to span pages %0200d", i, i)).Scan(&id)
		if err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		emit(report{Event: "acked", N: id})
	}
	emit(report{Event: "done"})
	awaitKill()
	return nil
}

func sqliteCount(ctx context.Context, args childArgs) error {
	db, err := openDB(args)
	if err != nil {
		return err
	}
	defer db.Close()
	var check string
	if err := db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&check); err != nil {
		return fmt.Errorf("integrity check: %w", err)
	}
	if check != "ok" {
		return fmt.Errorf("integrity check: %s", check)
	}
	r := report{Event: "count"}
	// A database that lost its schema reads as empty.
	var tables int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE name IN ('rows', 'counter')`).Scan(&tables); err != nil {
		return fmt.Errorf("read schema: %w", err)
	}
	if tables == 2 {
		if err := db.QueryRowContext(ctx, `SELECT count(*), coalesce(max(id), 0) FROM rows`).Scan(&r.N, &r.Last); err != nil {
			return fmt.Errorf("count rows: %w", err)
		}
		if err := db.QueryRowContext(ctx, `SELECT value FROM counter`).Scan(&r.Value); err != nil {
			return fmt.Errorf("read counter: %w", err)
		}
	}
	emit(r)
	return nil
}

func sqliteIncr(ctx context.Context, args childArgs) error {
	db, err := openDB(args)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, schema); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	for range args.Rows {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		var v int
		if err := tx.QueryRowContext(ctx, `SELECT value FROM counter`).Scan(&v); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("read counter: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE counter SET value = ?`, v+1); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("write counter: %w", err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
	}
	emit(report{Event: "done"})
	return nil
}

func startServer(args childArgs) (*server.Server, error) {
	opts := &server.Options{
		Host:       "127.0.0.1",
		Port:       -1,
		JetStream:  true,
		StoreDir:   args.Dir,
		SyncAlways: args.SyncAlways,
		NoSigs:     true,
		NoLog:      true,
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, err
	}
	s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		return nil, errors.New("nats-server not ready within 30s")
	}
	return s, nil
}

func natsPublish(ctx context.Context, args childArgs) error {
	s, err := startServer(args)
	if err != nil {
		return err
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		return err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject}, Storage: jetstream.FileStorage})
	if err != nil {
		return fmt.Errorf("create stream: %w", err)
	}
	for i := 1; i <= args.Msgs; i++ {
		ack, err := js.Publish(ctx, subject, []byte(fmt.Sprintf("message %d", i)))
		if err != nil {
			return fmt.Errorf("publish %d: %w", i, err)
		}
		emit(report{Event: "acked", N: int(ack.Sequence)})
	}
	emit(report{Event: "done"})
	awaitKill()
	return nil
}

func natsCount(ctx context.Context, args childArgs) error {
	s, err := startServer(args)
	if err != nil {
		return err
	}
	defer func() {
		s.Shutdown()
		s.WaitForShutdown()
	}()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	st, err := js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		emit(report{Event: "count"})
		return nil
	}
	if err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return fmt.Errorf("stream info: %w", err)
	}
	// Every surviving message must read back whole.
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		msg, err := st.GetMsg(ctx, seq)
		if err != nil {
			return fmt.Errorf("get message %d: %w", seq, err)
		}
		if want := fmt.Sprintf("message %d", seq); string(msg.Data) != want {
			return fmt.Errorf("message %d = %q, want %q", seq, msg.Data, want)
		}
	}
	emit(report{Event: "count", N: int(info.State.Msgs), Last: int(info.State.LastSeq)})
	return nil
}
