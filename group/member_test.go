package group_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/group"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fast is a Config whose timings a test waits out in seconds.
func fast(name, member string) group.Config {
	return group.Config{Name: name, Partitions: 8, Standbys: 1, Member: member,
		Heartbeat: 100 * time.Millisecond, MemberTTL: time.Second, StableAfter: 1500 * time.Millisecond}
}

func join(t *testing.T, js jetstream.JetStream, cfg group.Config) *group.Member {
	t.Helper()
	m, err := group.Join(t.Context(), js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// assignedTo waits until every member reads one assignment made for ids.
func assignedTo(t *testing.T, ms []*group.Member, ids ...string) group.Assignment {
	t.Helper()
	slices.Sort(ids)
	var a group.Assignment
	consumertest.Eventually(t, time.Minute, fmt.Sprintf("an assignment for %v read by all", ids), func() bool {
		a = ms[0].Assignment()
		for _, m := range ms {
			if b := m.Assignment(); !slices.Equal(b.Members, ids) || b.Epoch != a.Epoch {
				return false
			}
		}
		return true
	})
	return a
}

// Three members agree on one assignment, 3/3/2; a fourth joins and takes
// its share; one closes (leaves) and its partitions go to the others; a
// member of another group is never seen.
func TestMembersAgreeAndFollowJoinsAndLeaves(t *testing.T) {
	t.Parallel()
	_, js := consumertest.Connect(t, consumertest.RunServer(t))
	a, b, c := join(t, js, fast("g1", "a:1")), join(t, js, fast("g1", "b:1")), join(t, js, fast("g1", "c:1"))
	other := join(t, js, fast("g2", "z:1"))
	first := assignedTo(t, []*group.Member{a, b, c}, a.ID(), b.ID(), c.ID())
	owned := map[string]int{}
	for i := range first.Slots {
		owned[first.Owner(i)]++
	}
	if got := []int{owned[a.ID()], owned[b.ID()], owned[c.ID()]}; slices.Max(got) != 3 || slices.Min(got) != 2 {
		t.Fatalf("owners per member %v, want 3/3/2", owned)
	}
	if ms := other.Members(); len(ms) != 1 {
		t.Fatalf("the other group sees %d members, want its own one", len(ms))
	}
	d := join(t, js, fast("g1", "d:1"))
	second := assignedTo(t, []*group.Member{a, b, c, d}, a.ID(), b.ID(), c.ID(), d.ID())
	moved := 0
	for i := range second.Slots {
		if second.Owner(i) != first.Owner(i) {
			moved++
			if second.Owner(i) != d.ID() {
				t.Errorf("partition %d moved from %s to %s, not to the joiner", i, first.Owner(i), second.Owner(i))
			}
		}
	}
	if moved != 2 {
		t.Errorf("the join moved %d partitions, want the joiner's 2", moved)
	}
	c.Close()
	third := assignedTo(t, []*group.Member{a, b, d}, a.ID(), b.ID(), d.ID())
	for i := range third.Slots {
		if second.Owner(i) != c.ID() && third.Owner(i) != second.Owner(i) {
			t.Errorf("partition %d of %s, who stayed, moved to %s", i, second.Owner(i), third.Owner(i))
		}
	}
}

// A member that joins and closes more often than StableAfter is never
// given a partition: the assignment stays the one before it.
func TestAFlappingMemberMovesNothing(t *testing.T) {
	t.Parallel()
	_, js := consumertest.Connect(t, consumertest.RunServer(t))
	a, b := join(t, js, fast("g", "a:1")), join(t, js, fast("g", "b:1"))
	first := assignedTo(t, []*group.Member{a, b}, a.ID(), b.ID())
	for round := range 10 {
		f, err := group.Join(t.Context(), js, fast("g", fmt.Sprintf("f:%d", round)))
		if err != nil {
			t.Fatal(err)
		}
		consumertest.Eventually(t, time.Minute, "the flapping member seen", func() bool { _, ok := a.Members()[f.ID()]; return ok })
		f.Close()
	}
	if got := a.Assignment(); got.Epoch != first.Epoch {
		t.Fatalf("10 joins and leaves shorter than StableAfter wrote %d assignments", got.Epoch-first.Epoch)
	}
}

// A config out of range is refused before anything is made.
func TestJoinRefusesABadConfig(t *testing.T) {
	t.Parallel()
	_, js := consumertest.Connect(t, consumertest.RunServer(t))
	for _, cfg := range []group.Config{
		{Name: "a.b", Partitions: 1},
		{Name: "g", Partitions: 0},
		{Name: "g", Partitions: 2, Standbys: -1},
		{Name: "g", Partitions: 2, Heartbeat: time.Second, MemberTTL: 2 * time.Second},
	} {
		if _, err := group.Join(t.Context(), js, cfg); !errors.Is(err, group.ErrInvalidConfig) {
			t.Errorf("%+v: %v, want ErrInvalidConfig", cfg, err)
		}
	}
}

// A member of another shape (here --standbys 2 in a group of 1) neither
// coordinates, though first by id, nor is assigned, and says so
// (ErrShape); once the group's members have gone, its shape is the
// group's. It once wrote its own assignment, the coordinator wrote the
// group's back, and partitions moved every second (helper-30).
func TestAMemberOfAnotherShapeIsLeftOut(t *testing.T) {
	t.Parallel()
	_, js := consumertest.Connect(t, consumertest.RunServer(t))
	a, b := join(t, js, fast("g", "b:1")), join(t, js, fast("g", "c:1"))
	first := assignedTo(t, []*group.Member{a, b}, a.ID(), b.ID())
	odd := fast("g", "a:0")
	odd.Standbys = 2
	o := join(t, js, odd)
	consumertest.Eventually(t, time.Minute, "the odd member told of its shape", func() bool { return errors.Is(o.Mismatch(), group.ErrShape) })
	consumertest.Eventually(t, time.Minute, "the odd member a member past twice the damping", func() bool {
		rec, ok := a.Members()[o.ID()]
		return ok && rec.Up >= 2*odd.StableAfter
	})
	if got := a.Assignment(); got.Epoch != first.Epoch || slices.Contains(got.Members, o.ID()) {
		t.Fatalf("the odd member changed the assignment: epoch %d -> %d, members %v", first.Epoch, got.Epoch, got.Members)
	}
	a.Close()
	b.Close()
	consumertest.Eventually(t, time.Minute, "the odd member's shape the group's once alone", func() bool {
		got := o.Assignment()
		return got.Standbys == 2 && slices.Equal(got.Members, []string{o.ID()}) && o.Mismatch() == nil
	})
}
