package group_test

import (
	"slices"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/group"
)

// A partition whose assigned copies all wait (its log purged past them,
// its owner lost) is given to a member holding a ledger file of it, which
// may be the one that goes on (the lost owner back on its files); those
// that waited stay its standbys, so each member is tried once. Without
// this the group kept the partition on the waiting copies for good
// (helper-31's TestH31GroupChangelogPurgedUnderIt).
func TestAPartitionWhoseCopiesAllWaitGoesToAMemberHoldingItsFile(t *testing.T) {
	t.Parallel()
	_, js := consumertest.Connect(t, consumertest.RunServer(t))
	cfg := func(member string, files ...int) group.Config {
		c := fast("g", member)
		c.Partitions, c.Files = 2, files
		return c
	}
	ms := []*group.Member{join(t, js, cfg("a:1", 0, 1)), join(t, js, cfg("b:1", 0, 1)), join(t, js, cfg("c:1", 0, 1))}
	byID := map[string]*group.Member{}
	var ids []string
	for _, m := range ms {
		byID[m.ID()] = m
		ids = append(ids, m.ID())
	}
	first := assignedTo(t, ms, ids...)
	// Partition 0's copies all say they wait.
	waited := append([]string{first.Slots[0].Owner}, first.Slots[0].Standbys...)
	for _, id := range waited {
		byID[id].Report(0, group.Part{Role: "waiting"})
	}
	third := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return slices.Contains(waited, id) })
	var a group.Assignment
	consumertest.Eventually(t, time.Minute, "partition 0 given to the member not in its slot", func() bool {
		a = ms[0].Assignment()
		return a.Epoch > first.Epoch && a.Owner(0) == third[0]
	})
	if s := a.Slots[0].Standbys; !slices.Equal(s, waited) {
		t.Fatalf("partition 0's slot after the rescue: %+v; want the members that waited (%v) as its standbys", a.Slots[0], waited)
	}
	if !slices.EqualFunc(a.Slots[1:], first.Slots[1:], func(x, y group.Slot) bool { return x.Owner == y.Owner && slices.Equal(x.Standbys, y.Standbys) }) {
		t.Fatalf("partition 1 moved too: %+v, was %+v", a.Slots[1], first.Slots[1])
	}
}
