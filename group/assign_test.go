package group_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/jetledger/jetledger/group"
)

// checkSpread fails t unless slots give each of n partitions one owner
// among ms, owners spread within one of each other, and min(k, len(ms)-1)
// distinct standbys other than the owner, spread within two.
func checkSpread(t *testing.T, slots []group.Slot, n, k int, ms []string) {
	t.Helper()
	if len(slots) != n {
		t.Fatalf("%d slots, want %d", len(slots), n)
	}
	owned, stood := map[string]int{}, map[string]int{}
	for i, s := range slots {
		if !slices.Contains(ms, s.Owner) {
			t.Fatalf("partition %d: owner %q is no member of %v", i, s.Owner, ms)
		}
		owned[s.Owner]++
		if want := min(k, len(ms)-1); len(s.Standbys) != want {
			t.Fatalf("partition %d: standbys %v, want %d", i, s.Standbys, want)
		}
		for j, sb := range s.Standbys {
			if sb == s.Owner || !slices.Contains(ms, sb) || slices.Contains(s.Standbys[:j], sb) {
				t.Fatalf("partition %d: standbys %v with owner %q among %v", i, s.Standbys, s.Owner, ms)
			}
			stood[sb]++
		}
	}
	spread := func(what string, c map[string]int, slack int) {
		lo, hi := n*k+n, 0
		for _, m := range ms {
			lo, hi = min(lo, c[m]), max(hi, c[m])
		}
		if hi-lo > slack {
			t.Fatalf("%s per member %v: %d to %d: %+v", what, c, lo, hi, slots)
		}
	}
	spread("owners", owned, 1)
	spread("standbys", stood, 2)
}

func TestAssignThreeHostsEightPartitionsIsThreeThreeTwo(t *testing.T) {
	slots := group.Assign(8, 1, []string{"c", "a", "b"}, nil)
	checkSpread(t, slots, 8, 1, []string{"a", "b", "c"})
	owned := map[string]int{}
	for _, s := range slots {
		owned[s.Owner]++
	}
	got := []int{owned["a"], owned["b"], owned["c"]}
	slices.Sort(got)
	if !slices.Equal(got, []int{2, 3, 3}) {
		t.Fatalf("owners per host %v, want 3/3/2", owned)
	}
}

// Membership changes one at a time, at random: every assignment is spread
// evenly, the same whatever the members' order, unchanged when nothing
// changed, and moves only the owners it must: a join takes the joiner's
// share, a leave moves the leaver's partitions only.
func TestAssignIsEvenStickyAndDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		n, k := 1+r.IntN(24), r.IntN(3)
		ms := []string{"m0"}
		next := 1
		slots := group.Assign(n, k, ms, nil)
		for step := range 12 {
			before := slices.Clone(ms)
			if len(ms) > 1 && r.IntN(2) == 0 {
				j := r.IntN(len(ms))
				ms = slices.Delete(ms, j, j+1)
			} else {
				ms = append(ms, fmt.Sprintf("m%d", next))
				next++
			}
			prev := slots
			slots = group.Assign(n, k, ms, prev)
			name := fmt.Sprintf("round %d step %d: n=%d k=%d %v -> %v", round, step, n, k, before, ms)
			t.Run("", func(t *testing.T) {
				checkSpread(t, slots, n, k, ms)
				shuffled := slices.Clone(ms)
				r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
				if again := group.Assign(n, k, shuffled, prev); !slotsEqual(again, slots) {
					t.Fatalf("%s: members in another order assign otherwise", name)
				}
				if same := group.Assign(n, k, ms, slots); !slotsEqual(same, slots) {
					t.Fatalf("%s: the same members moved partitions:\n%v\n%v", name, slots, same)
				}
				moved, lost := 0, 0
				for i := range slots {
					if slots[i].Owner != prev[i].Owner {
						moved++
						if slices.Contains(ms, prev[i].Owner) {
							lost++
						}
					}
				}
				if len(ms) > len(before) { // a join: the joiner's share, no more
					if limit := (n + len(ms) - 1) / len(ms); moved > limit {
						t.Fatalf("%s: a join moved %d owners, the joiner's share is at most %d", name, moved, limit)
					}
				} else if lost > 0 && n%len(before) == 0 && n%len(ms) == 0 { // a leave on even shares: the leaver's partitions only
					t.Fatalf("%s: a leave moved %d partitions of members that stayed", name, lost)
				}
			})
		}
	}
}

// A partition that moves goes to its standby, whose copy is there, and
// its owner before stays a standby of it.
func TestAssignMovesToTheStandbyAndKeepsTheOwnerAsOne(t *testing.T) {
	prev := group.Assign(4, 1, []string{"a", "b"}, nil)
	slots := group.Assign(4, 1, []string{"a", "b", "c"}, prev)
	for i := range slots {
		if slots[i].Owner != prev[i].Owner && !slices.Contains(slots[i].Standbys, prev[i].Owner) {
			t.Fatalf("partition %d moved from %s to %s, and its owner before is no standby: %v", i, prev[i].Owner, slots[i].Owner, slots[i].Standbys)
		}
	}
	lost := group.Assign(4, 1, []string{"a"}, prev)
	for i := range lost {
		if prev[i].Owner == "b" && lost[i].Owner != "a" {
			t.Fatalf("partition %d of the lost member went to %s", i, lost[i].Owner)
		}
	}
}

func slotsEqual(a, b []group.Slot) bool {
	return slices.EqualFunc(a, b, func(x, y group.Slot) bool { return x.Owner == y.Owner && slices.Equal(x.Standbys, y.Standbys) })
}
