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

// reserve widens the filter once for the runs a read of the index is
// about to file, keeping every slot's bits: the allocs after it, up to
// the runs reserved, do not widen it again.
func TestFilterReserveWidensOnceAndKeepsEveryRun(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var f slicedFilter
	added := map[int][]uint64{}
	fill := func(runs int) {
		for range runs {
			slot := f.alloc()
			for range 50 {
				fp := rng.Uint64()
				f.add(slot, fp)
				added[slot] = append(added[slot], fp)
			}
		}
	}
	fill(11)
	f.reserve(700)
	width := f.width
	if width < (11+700+7)/8 {
		t.Fatalf("reserved 700 beside 11 runs: width %d bytes, %d slots", width, 8*width)
	}
	fill(700)
	if f.width != width {
		t.Fatalf("the filter widened from %d to %d bytes within what was reserved", width, f.width)
	}
	f.reserve(0)
	f.reserve(-5)
	if f.width != width {
		t.Fatalf("reserving nothing widened the filter from %d to %d bytes", width, f.width)
	}
	for slot, fps := range added {
		for _, fp := range fps {
			if !slices.Contains(f.slots(fp, nil), slot) {
				t.Fatalf("an id added to slot %d is not found there after the reserve", slot)
			}
		}
	}
}

// addRun, which a read of the index files each run with, sets exactly
// the bits add sets for each of the run's fingerprints, at every width.
func TestFilterAddRunSetsWhatAddSets(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var one, many slicedFilter
	for runs := 1; runs <= 20; runs++ {
		a, b := one.alloc(), many.alloc()
		if a != b {
			t.Fatalf("run %d: slots %d and %d", runs, a, b)
		}
		fps := make([]uint64, 1+rng.IntN(3000))
		for i := range fps {
			fps[i] = rng.Uint64()
		}
		for _, fp := range fps {
			one.add(a, fp)
		}
		many.addRun(b, fps)
		if !slices.Equal(one.bits, many.bits) {
			t.Fatalf("run %d (%d fingerprints, width %d): addRun set other bits than add", runs, len(fps), one.width)
		}
	}
}

// add files one fingerprint in slot, a bit at each probed position: what
// addRun does for each of a run's.
func (f *slicedFilter) add(slot int, fp uint64) {
	h1, h2 := probes(fp)
	for i := range uint64(filterProbes) {
		p := position(h1 + i*h2)
		f.bits[p*f.width+slot/8] |= 1 << (slot % 8)
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

// BenchmarkFilterLook is a look at a new id in the filter of a ledger of
// 50 million ids (763 full runs), and how many runs it names falsely:
//
//	go test -run XXX -bench FilterLook -benchtime 2000000x ./ledger
func BenchmarkFilterLook(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	var f slicedFilter
	for range 763 {
		slot := f.alloc()
		for range runRows {
			f.add(slot, rng.Uint64())
		}
	}
	var out []int
	falses := 0
	b.ResetTimer()
	for range b.N {
		out = f.slots(rng.Uint64(), out[:0])
		falses += len(out)
	}
	b.ReportMetric(float64(falses)/float64(b.N), "false-runs/look")
}
