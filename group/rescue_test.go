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
		c.Partitions, c.Files = 2, func() []int { return files }
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

// A partition whose owner's copy waits while a standby's follows goes to
// that standby, the owner its standby: a standby takes a lease only when
// it is assigned the partition, so the group kept it unowned until its
// members changed (helper-32). The lifecycle still decides whether the
// standby's copy may own, as for a static standby.
func TestAPartitionWhoseOwnerWaitsGoesToItsFollowingStandby(t *testing.T) {
	t.Parallel()
	_, js := consumertest.Connect(t, consumertest.RunServer(t))
	cfg := func(member string) group.Config {
		c := fast("g", member)
		c.Partitions = 2
		return c
	}
	ms := []*group.Member{join(t, js, cfg("a:1")), join(t, js, cfg("b:1"))}
	byID := map[string]*group.Member{}
	var ids []string
	for _, m := range ms {
		byID[m.ID()] = m
		ids = append(ids, m.ID())
	}
	first := assignedTo(t, ms, ids...)
	owner, standby := first.Slots[0].Owner, first.Slots[0].Standbys[0]
	byID[owner].Report(0, group.Part{Role: "waiting"})
	byID[standby].Report(0, group.Part{Role: "following"})
	var a group.Assignment
	consumertest.Eventually(t, time.Minute, "partition 0 given to its following standby", func() bool {
		a = ms[0].Assignment()
		return a.Epoch > first.Epoch && a.Owner(0) == standby
	})
	if !slices.Equal(a.Slots[0].Standbys, []string{owner}) || a.Owner(1) != first.Owner(1) {
		t.Fatalf("after the move: %+v, was %+v; want only partition 0 moved, its waiting owner its standby", a.Slots, first.Slots)
	}
}
