package ledger_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/jetledger/jetledger/ledger"
)

// A file that begins a new log marks its queued rows maybe sent: another
// host's copy of the earlier log may have been ahead and sent them. Not
// when the process that owned the earlier log, and held the partition
// since (TakeOverAsSoleWriter), begins it from the file whose last
// take-over was its own: no copy can be ahead of that one, and its rows
// went to review for nothing (helper-20's F1: 198 of 200 after the log
// was deleted under a busy owner).
func TestTheSoleWriterOfALogBeginsTheNextWithoutMarkingRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "owner.db")
	owner := openWithLog(t, file, &memLog{max: 4096})
	if err := owner.TakeOver(ctx, "log1", "a", 0, 0); err != nil {
		t.Fatal(err)
	}
	apply(t, owner, creditAndNote, batchOf(0, 10, 10)...)
	owner.Close()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	marked := func(how string, begin func(*ledger.Store) error) int {
		t.Helper()
		copyFile := filepath.Join(dir, how+".db")
		if err := os.WriteFile(copyFile, data, 0o600); err != nil {
			t.Fatal(err)
		}
		st := openWithLog(t, copyFile, &memLog{max: 4096})
		if err := begin(st); err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		return count(t, st, `SELECT count(*) FROM outbox WHERE maybe_sent = 1 AND status = 'queued'`)
	}
	if n := marked("sole", func(st *ledger.Store) error { return st.TakeOverAsSoleWriter(ctx, "log2", "a", 0, 0) }); n != 0 {
		t.Errorf("the sole writer's file began log2 with %d rows marked maybe sent, want 0", n)
	}
	if n := marked("plain", func(st *ledger.Store) error { return st.TakeOver(ctx, "log2", "a", 0, 0) }); n != 10 {
		t.Errorf("a take-over not known to be the sole writer's marked %d rows, want 10", n)
	}
	// Whose file it is counts too: "b" held the partition, but the file's
	// last take-over was a's (a copy b restored, say).
	if n := marked("other", func(st *ledger.Store) error { return st.TakeOverAsSoleWriter(ctx, "log2", "b", 0, 0) }); n != 10 {
		t.Errorf("b beginning log2 from a's file marked %d rows, want 10", n)
	}
}
