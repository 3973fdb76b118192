package ledger

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// The filter's look reads its rows a word at a time: at every width
// (slots a multiple of 64 or not, a row's tail shorter than a word) it
// names exactly the slots whose every probed bit is set, in order, as a
// bit-by-bit read does; and widening keeps every slot's bits.
func TestFilterSlotsAtEveryWidth(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var f slicedFilter
	added := map[int][]uint64{}
	for runs := 1; runs <= 150; runs++ {
		slot := f.alloc()
		for range 200 {
			fp := rng.Uint64()
			f.add(slot, fp)
			added[slot] = append(added[slot], fp)
		}
		if runs%7 != 0 && runs != 1 && runs != 64 && runs != 65 {
			continue
		}
		for slot, fps := range added {
			for _, fp := range fps[:5] {
				if !slices.Contains(f.slots(fp, nil), slot) {
					t.Fatalf("%d runs (width %d): an id added to slot %d is not found there", runs, f.width, slot)
				}
			}
		}
		for i := range 300 {
			fp := rng.Uint64()
			if i%2 == 0 { // one added: its slot and any false ones
				fps := added[rng.IntN(runs)]
				fp = fps[rng.IntN(len(fps))]
			}
			if got, want := f.slots(fp, nil), bitBySlot(&f, fp); !slices.Equal(got, want) {
				t.Fatalf("%d runs (width %d): slots %v, bit by bit %v", runs, f.width, got, want)
			}
		}
	}
}

// bitBySlot is the filter's look read one bit at a time.
func bitBySlot(f *slicedFilter, fp uint64) []int {
	var out []int
	h1, h2 := probes(fp)
	for slot := range 8 * f.width {
		all := true
		for i := range uint64(filterProbes) {
			p := position(h1 + i*h2)
			if f.bits[p*f.width+slot/8]&(1<<(slot%8)) == 0 {
				all = false
				break
			}
		}
		if all {
			out = append(out, slot)
		}
	}
	return out
}
