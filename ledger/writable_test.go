package ledger_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// CheckMayWrite answers what the next write would meet from the changelog
// (or another process's lock), and writes nothing: not to the file, not to
// the log. A caller that publishes before it writes (dlq requeue) relies
// on it to refuse where the write would be refused.
func TestCheckMayWriteSaysWhatAWriteWouldMeet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	log := &memLog{max: 1 << 20}
	owner := openWithLog(t, filepath.Join(dir, "owner.db"), log)
	if err := owner.CheckMayWrite(ctx); !errors.Is(err, ledger.ErrNotChangelogOwner) {
		t.Fatalf("before TakeOver: %v, want ErrNotChangelogOwner", err)
	}
	if err := owner.TakeOver(ctx, "log1", "a", 0, 0); err != nil {
		t.Fatal(err)
	}
	apply(t, owner, creditAndNote, batchOf(0, 2, 0)...)
	entries := len(log.entries)
	if err := owner.CheckMayWrite(ctx); err != nil || len(log.entries) != entries {
		t.Fatalf("the owner: %v, %d log entries (was %d), want nil and none appended", err, len(log.entries), entries)
	}

	standby := openWithLog(t, filepath.Join(dir, "standby.db"), nil)
	if err := standby.CheckMayWrite(ctx); err != nil {
		t.Fatalf("a ledger of one host: %v, want nil", err)
	}
	log.follow(t, standby) // now a copy of log1
	held := dump(t, standby)
	if err := standby.CheckMayWrite(ctx); !errors.Is(err, ledger.ErrChangelogCopy) || !strings.Contains(err.Error(), "log1") {
		t.Fatalf("a standby's copy: %v, want ErrChangelogCopy naming log1", err)
	}
	if got := dump(t, standby); got != held {
		t.Fatalf("the check changed the copy:\n%s\nwant\n%s", got, held)
	}

	log.fail = errors.New("the answer was lost")
	if _, err := owner.ApplyBatch(ctx, batchOf(2, 1, 0), creditAndNote, ledger.Budget{Work: time.Minute}); err == nil {
		t.Fatal("a batch whose Append failed committed")
	}
	if err := owner.CheckMayWrite(ctx); !errors.Is(err, ledger.ErrNotChangelogOwner) {
		t.Fatalf("after a failed Append: %v, want ErrNotChangelogOwner", err)
	}
}

// A ledger of one host whose write lock another process holds is busy for
// CheckMayWrite as for a write, once Config.BusyTimeout has passed.
func TestCheckMayWriteWaitsForAnotherWriter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "l.db")
	st, err := ledger.Open(file, ledger.Config{BusyTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	other, err := sql.Open("sqlite", file)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	if err := st.CheckMayWrite(ctx); !errors.Is(err, ledger.ErrBusy) {
		t.Fatalf("while another process holds the write lock: %v, want ErrBusy", err)
	}
	if _, err := conn.ExecContext(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	if err := st.CheckMayWrite(ctx); err != nil {
		t.Fatalf("once it let go: %v, want nil", err)
	}
}
