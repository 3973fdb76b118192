package changelog

import (
	"errors"
	"testing"

	"github.com/jetledger/jetledger/ledger"
)

// The lifecycle's rules, one situation each: what a host's file does
// before it follows or owns the log. The invariants: a file is replaced
// only by a snapshot that holds at least as much (else it is set aside or
// the host waits), and a log is begun only from a file that holds the
// snapshot and every acknowledged message.
func TestLifecycleDecides(t *testing.T) {
	t.Parallel()
	const L, L1 = "CL@2", "CL@1"
	pos := func(log string, seq uint64) ledger.ChangelogPosition {
		return ledger.ChangelogPosition{Log: log, Seq: seq}
	}
	file := func(log string, seq, seen uint64) fileState {
		return fileState{exists: true, pos: pos(log, seq), rows: int64(seq), seen: seen}
	}
	left := func(log string, seq, seen uint64) fileState {
		return fileState{exists: true, pos: ledger.ChangelogPosition{Origin: ledger.ChangelogOrigin{Log: log, Seq: seq}}, rows: int64(seen), seen: seen}
	}
	snap := func(log string, seq uint64, from ledger.ChangelogOrigin) snapshotInfo {
		p := pos(log, seq)
		p.Origin = from
		return snapshotInfo{ChangelogPosition: p, found: true}
	}
	tests := []struct {
		name        string
		s           situation
		want        step
		wantWaiting bool
	}{
		{"copy within its log", situation{file: file(L, 10, 10), log: L, first: 5, last: 20}, stepFollow, false},
		{"copy at the last of a purged log", situation{file: file(L, 20, 20), log: L, first: 0, last: 20}, stepFollow, false},
		// A copy at its log's last entry lacking an acknowledged message: a run out of the log applied it.
		{"copy at its log's last, lacking acked messages", situation{file: file(L, 20, 20), log: L, first: 1, last: 20, acked: 25}, stepWait, true},
		{"copy behind its log, acked messages ahead", situation{file: file(L, 10, 10), log: L, first: 1, last: 20, acked: 15}, stepFollow, false},
		{"copy ahead of its log (entries lost)", situation{file: file(L, 30, 30), log: L, first: 1, last: 20}, stepWait, true},
		{"copy behind a trimmed log, snapshot fits", situation{file: file(L, 3, 3), snap: snap(L, 9, ledger.ChangelogOrigin{}), log: L, first: 10, last: 20}, stepRestore, false},
		// Item 10: a purged log whose snapshot is behind it: a wait, not a loop of restores.
		{"copy behind a purged log, snapshot behind too", situation{file: file(L, 3, 3), snap: snap(L, 9, ledger.ChangelogOrigin{}), log: L, first: 0, last: 20}, stepWait, true},
		// Item 5: a replacement host with an empty disk restores the snapshot.
		{"no file, a snapshot", situation{snap: snap(L, 9, ledger.ChangelogOrigin{}), log: L, first: 10, last: 20}, stepRestore, false},
		{"no file, nothing anywhere: a new partition", situation{log: L}, stepBegin, false},
		// Item 4: no file, the log and snapshot gone, messages acknowledged: never begin from nothing.
		{"no file, nothing stored, messages acked", situation{log: L, acked: 50}, stepWait, true},
		{"no file, a log with entries and no snapshot", situation{log: L, last: 4}, stepWait, true},
		// Gap C: the log's first entry says it began from an empty ledger
		// (HeaderBegun), and its owner was lost before its first snapshot.
		{"no file, a log begun from none (the rule off: begunFromNoneOn)", situation{log: L, first: 1, last: 1, begunEmpty: true}, stepWait, true},
		{"no file, a log begun from none, its first entry trimmed", situation{log: L, first: 3, last: 4, begunEmpty: true}, stepWait, true},
		{"a plain ledger, a log begun from none", situation{file: fileState{exists: true, rows: 30, seen: 30}, log: L, first: 1, last: 4, begunEmpty: true}, stepWait, true},
		{"a plain ledger joins its empty log", situation{file: file("", 0, 40), log: L}, stepBegin, false},
		// Item 5: a ledger rebuilt by replay, joining a log that has a snapshot, gives way to it (set aside).
		{"a plain ledger, the partition has a snapshot", situation{file: fileState{exists: true, rows: 30, seen: 30}, snap: snap(L, 9, ledger.ChangelogOrigin{}), log: L, last: 20}, stepRestore, false},
		// Item 4: the log deleted; the owner's file, as full as the old snapshot, begins the new one.
		{"copy of the deleted log, at least its snapshot", situation{file: file(L1, 50, 50), snap: snap(L1, 40, ledger.ChangelogOrigin{}), log: L}, stepBegin, false},
		{"copy of the deleted log, behind its snapshot", situation{file: file(L1, 30, 30), snap: snap(L1, 40, ledger.ChangelogOrigin{}), log: L}, stepRestore, false},
		// The deleted log's owner said its ledger held entry 60: a copy at 50 waits for it; one at 60 (the owner's) begins.
		{"copy of the deleted log behind its last owner's", situation{file: file(L1, 50, 50), snap: snap(L1, 40, ledger.ChangelogOrigin{}), log: L, owner: OwnerPosition{Log: L1, Seq: 60}}, stepWait, true},
		{"copy of the deleted log, its last owner's", situation{file: file(L1, 60, 60), snap: snap(L1, 40, ledger.ChangelogOrigin{}), log: L, owner: OwnerPosition{Log: L1, Seq: 60}}, stepBegin, false},
		{"copy of the deleted log, an owner of a log before it", situation{file: file(L1, 50, 50), snap: snap(L1, 40, ledger.ChangelogOrigin{}), log: L, owner: OwnerPosition{Log: "CL@0", Seq: 90}}, stepBegin, false},
		{"copy of the deleted log lacking acked messages", situation{file: file(L1, 45, 45), snap: snap(L1, 40, ledger.ChangelogOrigin{}), log: L, acked: 50}, stepWait, true},
		{"copy of the deleted log, new log begun from as much", situation{file: file(L1, 45, 45), snap: snap(L, 3, ledger.ChangelogOrigin{Log: L1, Seq: 50}), log: L, first: 1, last: 3}, stepRestore, false},
		{"copy of the deleted log, new log begun from less", situation{file: file(L1, 55, 55), snap: snap(L, 3, ledger.ChangelogOrigin{Log: L1, Seq: 50}), log: L, first: 1, last: 3}, stepWait, true},
		{"copy of the deleted log, the new log not snapshotted", situation{file: file(L1, 50, 50), snap: snap(L1, 40, ledger.ChangelogOrigin{}), log: L, last: 2}, stepWait, true},
		// A file that left its log (--leave-changelog) at entry 50 and
		// applied more outside it is never restored over.
		{"left the log at its last entry", situation{file: left(L1, 50, 60), snap: snap(L1, 40, ledger.ChangelogOrigin{}), log: L1, first: 1, last: 50}, stepWait, true},
		{"left the log, the log deleted since", situation{file: left(L1, 50, 60), snap: snap(L1, 40, ledger.ChangelogOrigin{}), log: L}, stepBegin, false},
		{"left the log, the log deleted, a fuller snapshot", situation{file: left(L1, 50, 60), snap: snap(L1, 55, ledger.ChangelogOrigin{}), log: L}, stepWait, true},
		{"left the log, the partition went on without it", situation{file: left(L1, 50, 60), snap: snap(L1, 55, ledger.ChangelogOrigin{}), log: L1, first: 1, last: 58}, stepWait, true},
		{"left the log, a new log begun elsewhere", situation{file: left(L1, 50, 60), snap: snap(L, 3, ledger.ChangelogOrigin{Log: L1, Seq: 50}), log: L, first: 1, last: 3}, stepWait, true},
		{"left the log with nothing in it: restored", situation{file: fileState{exists: true, pos: ledger.ChangelogPosition{Origin: ledger.ChangelogOrigin{Log: L1, Seq: 50}}}, snap: snap(L1, 50, ledger.ChangelogOrigin{}), log: L1, first: 1, last: 50}, stepRestore, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := decide(tt.s)
			if r.step != tt.want || errors.Is(err, ErrWaiting) != tt.wantWaiting {
				t.Fatalf("rule %q, step %d, err %v; want step %d, waiting %v", r.name, r.step, err, tt.want, tt.wantWaiting)
			}
		})
	}
}

// A snapshot is stored only over one the ledger holds all of.
func TestHoldsAtLeast(t *testing.T) {
	t.Parallel()
	have := ledger.ChangelogPosition{Log: "CL@1", Seq: 40}
	for _, tt := range []struct {
		pos  ledger.ChangelogPosition
		want bool
	}{
		{ledger.ChangelogPosition{Log: "CL@1", Seq: 40}, true},
		{ledger.ChangelogPosition{Log: "CL@1", Seq: 39}, false},
		{ledger.ChangelogPosition{Log: "CL@2", Seq: 1, Origin: ledger.ChangelogOrigin{Log: "CL@1", Seq: 41}}, true},
		{ledger.ChangelogPosition{Log: "CL@2", Seq: 99, Origin: ledger.ChangelogOrigin{Log: "CL@1", Seq: 0}}, false},
		{ledger.ChangelogPosition{Log: "CL@2", Seq: 99}, false},
	} {
		if got := holdsAtLeast(tt.pos, have); got != tt.want {
			t.Errorf("holdsAtLeast(%+v, %+v) = %v, want %v", tt.pos, have, got, tt.want)
		}
	}
}
