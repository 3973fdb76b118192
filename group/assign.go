package group

import (
	"cmp"
	"slices"
)

// Slot is one partition's place in an Assignment: its owner and its
// standbys, by member id ("" owner: no member to own it).
type Slot struct {
	Owner    string   `json:"owner"`
	Standbys []string `json:"standbys,omitempty"`
}

// Assign spreads n partitions over members (ids): each partition gets one
// owner and min(k, len(members)-1) standbys on other members, as evenly
// as the counts allow (owners differ by at most one between members), and
// moves as little of prev as it can: a partition keeps its owner and its
// standbys while they are members and within their share, a partition
// that must move goes first to one of its standbys (its copy is there),
// and an owner that loses a partition keeps it as a standby. Members in
// any order; the result is the same for the same input on every host.
func Assign(n, k int, members []string, prev []Slot) []Slot {
	ms := slices.Clone(members)
	slices.Sort(ms)
	ms = slices.Compact(ms)
	slots := make([]Slot, n)
	if len(ms) == 0 {
		return slots
	}
	prev = slices.Clone(prev)
	prev = append(prev, make([]Slot, max(0, n-len(prev)))...)
	slots = assignOnce(n, min(k, len(ms)-1), ms, prev)
	// Its own input again until it stays (a share met only by exceeding
	// another moves on the next pass): the same members then keep it.
	for range fixedPasses {
		again := assignOnce(n, min(k, len(ms)-1), ms, slots)
		if slices.EqualFunc(again, slots, sameSlot) {
			break
		}
		slots = again
	}
	return slots
}

// fixedPasses bounds the passes Assign makes of its own result.
const fixedPasses = 8

func sameSlot(a, b Slot) bool { return a.Owner == b.Owner && slices.Equal(a.Standbys, b.Standbys) }

func assignOnce(n, k int, ms []string, prev []Slot) []Slot {
	slots := make([]Slot, n)
	owners := assignOwners(n, ms, prev)
	for i := range slots {
		slots[i].Owner = owners[i]
	}
	assignStandbys(k, ms, prev, slots)
	return slots
}

// assignOwners keeps each partition's owner within its share, then gives
// the rest to the members below theirs, a standby of the partition first.
func assignOwners(n int, ms []string, prev []Slot) []string {
	member := make(map[string]bool, len(ms))
	for _, m := range ms {
		member[m] = true
	}
	owners := make([]string, n)
	count := map[string]int{}
	for i := range n {
		if o := prev[i].Owner; member[o] {
			owners[i] = o
			count[o]++
		}
	}
	quota := shares(n, ms, count)
	for i := n - 1; i >= 0; i-- { // a member above its share gives up its last partitions
		if o := owners[i]; o != "" && count[o] > quota[o] {
			owners[i] = ""
			count[o]--
		}
	}
	for i := range n {
		if owners[i] != "" {
			continue
		}
		owners[i] = pick(ms, func(m string) bool { return count[m] < quota[m] }, prev[i].Standbys, count)
		count[owners[i]]++
	}
	return owners
}

// assignStandbys gives each partition k standbys other than its owner:
// its standbys before, and its owner before, kept within their share;
// then the members with the fewest standbys.
func assignStandbys(k int, ms []string, prev []Slot, slots []Slot) {
	if k <= 0 {
		return
	}
	member := make(map[string]bool, len(ms))
	for _, m := range ms {
		member[m] = true
	}
	count := map[string]int{}
	for i := range slots {
		// The owner before holds the whole copy: the first to keep.
		for _, s := range append([]string{prev[i].Owner}, prev[i].Standbys...) {
			if member[s] && s != slots[i].Owner && !slices.Contains(slots[i].Standbys, s) && len(slots[i].Standbys) < k {
				slots[i].Standbys = append(slots[i].Standbys, s)
				count[s]++
			}
		}
	}
	quota := shares(len(slots)*k, ms, count)
	// A member above its share hands a standby over to one below its
	// share that may take that partition (not its owner, not already
	// one): each hand-over lowers the excess, so this ends.
	for changed := true; changed; {
		changed = false
		for i := len(slots) - 1; i >= 0; i-- {
			for j, s := range slots[i].Standbys {
				if count[s] <= quota[s] {
					continue
				}
				under := func(m string) bool {
					return count[m] < quota[m] && m != slots[i].Owner && !slices.Contains(slots[i].Standbys, m)
				}
				if r := pick(ms, under, nil, count); r != "" {
					slots[i].Standbys[j] = r
					count[s]--
					count[r]++
					changed = true
				}
			}
		}
	}
	for i := range slots {
		for len(slots[i].Standbys) < k {
			free := func(m string) bool { return m != slots[i].Owner && !slices.Contains(slots[i].Standbys, m) }
			s := pick(ms, func(m string) bool { return free(m) && count[m] < quota[m] }, nil, count)
			if s == "" { // the shares cannot all be met here: the least loaded
				s = pick(ms, free, nil, count)
			}
			slots[i].Standbys = append(slots[i].Standbys, s)
			count[s]++
		}
	}
}

// shares splits total over ms as evenly as it goes: the members holding
// the most already (then by id) get the one more each that the remainder
// allows, so that what they hold moves least.
func shares(total int, ms []string, holding map[string]int) map[string]int {
	order := slices.Clone(ms)
	slices.SortStableFunc(order, func(a, b string) int { return cmp.Compare(holding[b], holding[a]) })
	quota := make(map[string]int, len(ms))
	for j, m := range order {
		quota[m] = total / len(ms)
		if j < total%len(ms) {
			quota[m]++
		}
	}
	return quota
}

// pick is the member that ok allows, one of preferred first, else the one
// holding fewest (then by id); "" when ok allows none.
func pick(ms []string, ok func(string) bool, preferred []string, count map[string]int) string {
	best := ""
	for _, p := range preferred {
		if slices.Contains(ms, p) && ok(p) && (best == "" || count[p] < count[best]) {
			best = p
		}
	}
	if best != "" {
		return best
	}
	for _, m := range ms {
		if ok(m) && (best == "" || count[m] < count[best]) {
			best = m
		}
	}
	return best
}
