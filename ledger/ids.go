package ledger

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math/bits"
	"slices"
	"sort"
	"strings"
	"sync"
)

// processed_messages keeps its rows by seq, in the order they were applied,
// and has no index on message_id: a batch of random ids then writes at the
// table's end, as one of ids that grow does. Ids are found by fingerprint:
// the rows above the newest sealed run through a map, and each sealed run
// of runRows seqs through its sorted fingerprints in processed_fingerprints,
// which a filter in memory tells which runs may hold. Every candidate is
// read and its id compared, so the index is a hint that may say too much
// (a row since pruned, a fingerprint two ids share) but never too little.
const (
	// runRows is the seqs a sealed run covers: 1 MiB of fingerprints
	// written once in a batch (about 30 ms), and a run more to look at per
	// 65 536 ids.
	runRows = 1 << 16
	// chunkPairs is the fingerprints per processed_fingerprints row: 3 840
	// bytes, kept in the row on a 4 KiB page.
	chunkPairs = 240
	pairBytes  = 16
	// filterPositions and filterProbes size the filter: 24 bits an id of a
	// full run (3 bytes an id in memory), 17 probes, so that a new id
	// meets a false candidate run about once in 100 000 runs' looks, each
	// a read of a chunk (20-40 us, a disk read where the file is not
	// cached): at 50 million ids (763 runs), one new id in 130 (at 20 bits
	// and 14 probes, one in 20; at 16 bits, a third). The look stops at
	// the first probed row that rules every run out, about the seventh,
	// so the probes past that cost little.
	filterPositions = 24 * runRows
	filterProbes    = 17
)

// fingerprint is the stored hash of a message id. Kept in files: it never
// changes.
func fingerprint(id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id)) //nolint:errcheck // hashes never fail
	return mix64(h.Sum64())
}

// mix64 is splitmix64's finalizer: FNV's low bits alone spread poorly.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// slicedFilter is a Bloom filter per run, kept bit-sliced: position i of
// every run's filter is in one row of width bytes, a bit a run (its slot).
// A look at an id reads filterProbes rows, however many runs there are.
type slicedFilter struct {
	width int    // bytes a position: 8*width slots
	bits  []byte // filterPositions rows of width bytes
	used  []bool // by slot
	// addRun's and fileRun's buffers (9 MiB), kept from one run to the
	// next while a read files them, and let go after it (an edge host
	// runs within --memory-limit).
	fps          []uint64
	pos, grouped []uint32
	count        []int
}

func probes(fp uint64) (h1, h2 uint64) { return fp, mix64(fp^0x9e3779b97f4a7c15) | 1 }

// position maps a hash onto the filter's positions (Lemire's multiply and
// shift: filterPositions is no power of two).
func position(h uint64) int {
	hi, _ := bits.Mul64(h, filterPositions)
	return int(hi)
}

// alloc returns a free slot, widening the filter when there is none.
func (f *slicedFilter) alloc() int {
	if i := slices.Index(f.used, false); i >= 0 {
		f.used[i] = true
		return i
	}
	// Wider by an eighth (at most that unused): a byte at a time, the read
	// of 763 runs copied the whole filter 96 times (6 s of its 24).
	f.widen(f.width + max(1, f.width/8))
	return f.alloc()
}

// reserve makes room for n more runs at once, and an eighth more: a read
// of the index files every run, and by one alloc after another it widened
// the filter 20-odd times, each a copy beside the one before (the bench's
// peak RSS reading 763 runs: 1 021 and 1 062 MiB, against 717 MiB
// reserved first).
func (f *slicedFilter) reserve(n int) {
	free := 0
	for _, u := range f.used {
		if !u {
			free++
		}
	}
	if n <= free {
		return
	}
	w := (len(f.used) - free + n + 7) / 8
	f.widen(w + w/8)
}

// widen makes every row w bytes, keeping each slot's bits.
func (f *slicedFilter) widen(w int) {
	wider := make([]byte, filterPositions*w)
	for p := range filterPositions {
		copy(wider[p*w:], f.bits[p*f.width:(p+1)*f.width])
	}
	f.width, f.bits = w, wider
	for len(f.used) < 8*w {
		f.used = append(f.used, false)
	}
}

// addRun adds a run's fingerprints to slot, setting the bits of each
// one's filterProbes positions in that slot's column: their
// probes' positions grouped first by the 1 024 rows they fall in, so that
// the bits are set a region of the filter after another rather than at
// random over all of it. At random, a read of 50 million ids set 850
// million bits, each a cache miss (25-28 s, the most of the read).
func (f *slicedFilter) addRun(slot int, fps []uint64) {
	const regionBits = 10
	regions := (filterPositions-1)>>regionBits + 1
	if cap(f.count) < regions+1 {
		f.count = make([]int, regions+1)
	}
	count := f.count[:regions+1]
	clear(count)
	pos := f.pos[:0]
	for _, fp := range fps {
		h1, h2 := probes(fp)
		for i := range uint64(filterProbes) {
			p := uint32(position(h1 + i*h2))
			pos = append(pos, p)
			count[p>>regionBits+1]++
		}
	}
	for i := 1; i <= regions; i++ {
		count[i] += count[i-1]
	}
	grouped := slices.Grow(f.grouped[:0], len(pos))[:len(pos)]
	for _, p := range pos {
		grouped[count[p>>regionBits]] = p
		count[p>>regionBits]++
	}
	b, bit := slot/8, byte(1)<<(slot%8)
	for _, p := range grouped {
		f.bits[int(p)*f.width+b] |= bit
	}
	f.pos, f.grouped = pos, grouped
}

// free empties slot.
func (f *slicedFilter) free(slot int) {
	mask := ^byte(1 << (slot % 8))
	for p := slot / 8; p < len(f.bits); p += f.width {
		f.bits[p] &= mask
	}
	f.used[slot] = false
}

// slots appends to out the slots whose runs may hold fp, in order. The
// rows are read a word of each at a time, not a row after another: the
// rows miss the CPU's cache, and read side by side their misses overlap.
// Byte by byte and row by row they did not, and at 763 runs (50M ids) a
// look took 5.4 us, the most of what a large ledger cost a message. A word
// stops at the first row that leaves no run in it (half a row's bits are
// set, so about the seventh): at 763 runs a look took 2.2 us reading all
// 17 rows, 1.3 us stopping (BenchmarkFilterLook).
func (f *slicedFilter) slots(fp uint64, out []int) []int {
	if f.width == 0 {
		return out
	}
	var rows [filterProbes][]byte
	h1, h2 := probes(fp)
	for i := range rows {
		p := position(h1 + uint64(i)*h2)
		rows[i] = f.bits[p*f.width : (p+1)*f.width]
	}
	for j := 0; j < f.width; j += 8 {
		acc := ^uint64(0)
		for _, r := range rows {
			if acc &= wordAt(r, j); acc == 0 {
				break
			}
		}
		for acc != 0 {
			out = append(out, j*8+bits.TrailingZeros64(acc))
			acc &= acc - 1
		}
	}
	return out
}

// wordAt is the little-endian word of r's bytes from j (fewer at its end):
// its bit b is slot 8*j+b.
func wordAt(r []byte, j int) uint64 {
	if j+8 <= len(r) {
		return binary.LittleEndian.Uint64(r[j:])
	}
	var w uint64
	for k, b := range r[j:] {
		w |= uint64(b) << (8 * k)
	}
	return w
}

// idRun is a sealed run.
type idRun struct {
	first, last int64 // seqs
	chunk0      int64
	los         []uint64 // first fingerprint of each chunk
	slot        int
}

// chunksOf are the chunks of r that may hold fp: the last that starts at
// or below it, and one before when that one starts at fp itself (pairs of
// one fingerprint, two ids sharing it, may straddle them); ok false if
// none.
func (r *idRun) chunksOf(fp uint64) (from, to int64, ok bool) {
	above := sort.Search(len(r.los), func(i int) bool { return r.los[i] > fp })
	if above == 0 {
		return 0, 0, false
	}
	at := sort.Search(len(r.los), func(i int) bool { return r.los[i] >= fp })
	return r.chunk0 + int64(max(at-1, 0)), r.chunk0 + int64(above-1), true
}

// seqsIn reads the seqs of fp in run r's chunks.
func seqsIn(q query, r *idRun, fp uint64) ([]int64, error) {
	from, to, ok := r.chunksOf(fp)
	if !ok {
		return nil, nil
	}
	var seqs []int64
	err := eachRow(q, func(rows *sql.Rows) error {
		var pairs []byte
		if err := rows.Scan(&pairs); err != nil {
			return err
		}
		seqs = append(seqs, seqsOf(pairs, fp)...)
		return nil
	}, `SELECT pairs FROM processed_fingerprints WHERE chunk BETWEEN ? AND ?`, from, to)
	return seqs, err
}

// query runs a statement on the connection or transaction at hand.
type query func(query string, args ...any) (*sql.Rows, error)

// idIndex finds processed_messages rows by id. Its lock is held while it
// is read or brought up to the file.
type idIndex struct {
	mu       sync.Mutex
	loaded   bool
	runs     []*idRun // by first
	filter   slicedFilter
	partial  bool               // runs holds those filed before a look failed
	sealedTo int64              // last seq of the newest run; 0: none
	known    int64              // every row above sealedTo up to it is in open
	open     map[uint64]int64   // fingerprint to seq, of rows above sealedTo
	more     map[uint64][]int64 // further seqs of a fingerprint open holds
}

// reset forgets everything; the next look loads the index again.
func (x *idIndex) reset() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.loaded = false
}

func (x *idIndex) addOpen(fp uint64, seq int64) {
	old, ok := x.open[fp]
	switch {
	case !ok:
		x.open[fp] = seq
	case old != seq && !slices.Contains(x.more[fp], seq):
		x.more[fp] = append(x.more[fp], seq)
	}
}

// sync brings the index up to the file as q sees it: runs sealed or
// dropped, rows written since it last looked, by this process or another
// (a standby's applied entries, a prune). Called with x.mu held.
func (x *idIndex) sync(q query) error {
	if !x.loaded {
		x.runs, x.filter, x.sealedTo, x.known, x.partial = nil, slicedFilter{}, 0, 0, false
		x.open, x.more = map[uint64]int64{}, map[uint64][]int64{}
		x.loaded = true
	}
	// A look that fails (a batch past its deadline while a large index is
	// read at start) leaves what it read: the next one goes on from there.
	var n, newest int64
	if err := queryRow(q, []any{&n, &newest}, `SELECT count(*), coalesce(max(first), 0) FROM processed_runs`); err != nil {
		return err
	}
	if x.partial || n != int64(len(x.runs)) || (n > 0 && newest != x.runs[len(x.runs)-1].first) {
		if err := x.loadRuns(q); err != nil {
			return err
		}
	}
	return eachFingerprint(q, func(fp uint64, seq int64) {
		x.addOpen(fp, seq)
		x.known = max(x.known, seq)
	}, `WHERE seq > ? ORDER BY seq`, max(x.known, x.sealedTo))
}

// readRuns reads the sealed runs, by first.
func readRuns(q query) ([]*idRun, error) {
	var runs []*idRun
	err := eachRow(q, func(rows *sql.Rows) error {
		r := &idRun{slot: -1}
		var los []byte
		if err := rows.Scan(&r.first, &r.last, &r.chunk0, &los); err != nil {
			return err
		}
		for b := los; len(b) >= 8; b = b[8:] {
			r.los = append(r.los, binary.BigEndian.Uint64(b))
		}
		runs = append(runs, r)
		return nil
	}, `SELECT first, last, chunk0, los FROM processed_runs ORDER BY first`)
	return runs, err
}

// loadRuns reads the runs, filing new ones in the filter and freeing the
// slots of those gone. Called with x.mu held.
func (x *idIndex) loadRuns(q query) error {
	runs, err := readRuns(q)
	if err != nil {
		return err
	}
	had := map[int64]*idRun{}
	for _, r := range x.runs {
		had[r.first] = r
	}
	x.filter.reserve(len(runs) - len(x.runs)) // at least the new ones: alloc widens for more
	defer func() { x.filter.fps, x.filter.pos, x.filter.grouped, x.filter.count = nil, nil, nil, nil }()
	filed := make([]*idRun, 0, len(runs))
	for _, r := range runs {
		if old := had[r.first]; old != nil && old.last == r.last && old.chunk0 == r.chunk0 {
			r.slot = old.slot
			delete(had, r.first)
			filed = append(filed, r)
			continue
		}
		r.slot = x.filter.alloc()
		if err := x.fileRun(q, r); err != nil {
			x.filter.free(r.slot)
			// Keep what is filed, and the slots not freed yet.
			x.runs, x.partial = slices.AppendSeq(filed, maps.Values(had)), true
			slices.SortFunc(x.runs, func(a, b *idRun) int { return cmp.Compare(a.first, b.first) })
			return err
		}
		filed = append(filed, r)
	}
	for _, r := range had {
		x.filter.free(r.slot)
	}
	x.runs, x.partial = runs, false
	if len(runs) > 0 && runs[len(runs)-1].last > x.sealedTo {
		x.sealedTo = runs[len(runs)-1].last
		x.dropOpenTo(x.sealedTo)
	}
	return nil
}

// dropOpenTo forgets the open rows up to seq, which a run now covers.
func (x *idIndex) dropOpenTo(seq int64) {
	maps.DeleteFunc(x.open, func(_ uint64, s int64) bool { return s <= seq })
	for fp, seqs := range x.more {
		if seqs = slices.DeleteFunc(seqs, func(s int64) bool { return s <= seq }); len(seqs) == 0 {
			delete(x.more, fp)
		} else {
			x.more[fp] = seqs
		}
	}
}

// holdsID says whether processed_messages holds id, through q, without an
// index in memory: one chunk of each run and the rows above the runs. For
// a file no run keeps open (a copy the changelog lifecycle looks at).
func holdsID(q query, id string) (bool, error) {
	runs, err := readRuns(q)
	if err != nil {
		return false, err
	}
	fp := fingerprint(id)
	var above int64
	args := []any{id, 0}
	for _, r := range runs {
		above = max(above, r.last)
		seqs, err := seqsIn(q, r, fp)
		if err != nil {
			return false, err
		}
		for _, seq := range seqs {
			args = append(args, seq)
		}
	}
	args[1] = above
	var held bool
	err = queryRow(q, []any{&held}, `SELECT EXISTS (SELECT 1 FROM processed_messages WHERE message_id = ? AND (seq > ?`+
		strings.Repeat(" OR seq = ?", len(args)-2)+`))`, args...)
	return held, err
}

// fileRun adds the fingerprints of run r to the filter.
func (x *idIndex) fileRun(q query, r *idRun) error {
	fps := x.filter.fps[:0]
	err := eachRow(q, func(rows *sql.Rows) error {
		var pairs []byte
		if err := rows.Scan(&pairs); err != nil {
			return err
		}
		for ; len(pairs) >= pairBytes; pairs = pairs[pairBytes:] {
			fps = append(fps, binary.BigEndian.Uint64(pairs))
		}
		return nil
	}, `SELECT pairs FROM processed_fingerprints WHERE chunk BETWEEN ? AND ?`, r.chunk0, r.chunk0+int64(len(r.los))-1)
	if err == nil {
		x.filter.addRun(r.slot, fps)
	}
	x.filter.fps = fps
	return err
}

// candidates returns, for each of ids, the seqs of rows that may hold it,
// after bringing the index up to the file through q.
func (x *idIndex) candidates(q query, ids []string) (map[string][]int64, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.sync(q); err != nil {
		return nil, err
	}
	out := map[string][]int64{}
	var slots []int
	type look struct {
		id  string
		run *idRun
	}
	var looks []look
	bySlot := map[int]*idRun{}
	for _, r := range x.runs {
		bySlot[r.slot] = r
	}
	for _, id := range ids {
		fp := fingerprint(id)
		if seq, ok := x.open[fp]; ok {
			out[id] = append(append(out[id], seq), x.more[fp]...)
		}
		slots = x.filter.slots(fp, slots[:0])
		for _, s := range slots {
			if r := bySlot[s]; r != nil {
				looks = append(looks, look{id, r})
			}
		}
	}
	for _, l := range looks {
		seqs, err := seqsIn(q, l.run, fingerprint(l.id))
		if err != nil {
			return nil, err
		}
		out[l.id] = append(out[l.id], seqs...)
	}
	return out, nil
}

// seqsOf returns the seqs of fp in a chunk's sorted pairs.
func seqsOf(pairs []byte, fp uint64) []int64 {
	n := len(pairs) / pairBytes
	i := sort.Search(n, func(i int) bool { return binary.BigEndian.Uint64(pairs[i*pairBytes:]) >= fp })
	var out []int64
	for ; i < n && binary.BigEndian.Uint64(pairs[i*pairBytes:]) == fp; i++ {
		out = append(out, int64(binary.BigEndian.Uint64(pairs[i*pairBytes+8:])))
	}
	return out
}

// nextSeq is the seq of the next row written: above every row and run the
// index knows of, so a seq is never used twice while it runs.
func (x *idIndex) nextSeq(q query) (int64, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.loaded {
		if err := x.sync(q); err != nil {
			return 0, err
		}
	}
	var top int64
	if err := queryRow(q, []any{&top}, `SELECT coalesce(max(seq), 0) FROM processed_messages`); err != nil {
		return 0, err
	}
	return max(top, x.known, x.sealedTo) + 1, nil
}

// committed files the rows a batch wrote, seqs from..to with the given
// ids, once its transaction committed. Called with every seq up to from-1
// already known (the batch's own look brought the index there).
func (x *idIndex) committed(rows []*seen) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.loaded || len(rows) == 0 {
		return
	}
	if rows[0].seq != x.known+1 && x.known >= x.sealedTo {
		// Someone else wrote between: the next look reads the rows.
		return
	}
	for _, k := range rows {
		x.addOpen(fingerprint(k.id), k.seq)
		x.known = max(x.known, k.seq)
	}
}

// sealDue is the run to seal after a batch wrote fresh, up to seq top, if
// a whole one is above the newest: seqs first..last and their sorted
// fingerprints, from the open rows (every row above the newest run, as
// the batch's look left them) and fresh.
func (x *idIndex) sealDue(top int64, fresh []*seen) (first, last int64, pairs [][2]uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	first, last = x.sealedTo+1, x.sealedTo+runRows
	if !x.loaded || top < last {
		return 0, 0, nil
	}
	pairs = make([][2]uint64, 0, runRows)
	in := func(seq int64) bool { return seq >= first && seq <= last }
	for fp, seq := range x.open {
		if in(seq) {
			pairs = append(pairs, [2]uint64{fp, uint64(seq)})
		}
	}
	for fp, seqs := range x.more {
		for _, seq := range seqs {
			if in(seq) {
				pairs = append(pairs, [2]uint64{fp, uint64(seq)})
			}
		}
	}
	for _, k := range fresh {
		if in(k.seq) {
			pairs = append(pairs, [2]uint64{fingerprint(k.id), uint64(k.seq)})
		}
	}
	sortPairs(pairs)
	return first, last, pairs
}

// sortPairs sorts a run's (fingerprint, seq) pairs.
func sortPairs(pairs [][2]uint64) {
	slices.SortFunc(pairs, func(a, b [2]uint64) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
}

// writeRun writes the run of seqs first..last: its rows' sorted
// fingerprints and its processed_runs row. The index files it at its
// next look.
func writeRun(q query, exec func(string, ...any) error, first, last int64, pairs [][2]uint64) error {
	var chunk0 int64
	if err := queryRow(q, []any{&chunk0}, `SELECT coalesce(max(chunk), 0) + 1 FROM processed_fingerprints`); err != nil {
		return err
	}
	los := []byte{}
	for i := 0; i < len(pairs); i += chunkPairs {
		part := pairs[i:min(i+chunkPairs, len(pairs))]
		buf := make([]byte, 0, len(part)*pairBytes)
		for _, p := range part {
			buf = binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(buf, p[0]), p[1])
		}
		los = binary.BigEndian.AppendUint64(los, part[0][0])
		if err := exec(`INSERT INTO processed_fingerprints (chunk, pairs) VALUES (?, ?)`, chunk0+int64(i/chunkPairs), buf); err != nil {
			return err
		}
	}
	return exec(`INSERT INTO processed_runs (first, last, chunk0, los) VALUES (?, ?, ?, ?)`, first, last, chunk0, los)
}

// queryRow scans the one row of a query into dest.
func queryRow(q query, dest []any, query string, args ...any) error {
	rows, err := q(query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		return cmp.Or(rows.Err(), sql.ErrNoRows)
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	return rows.Err()
}

// eachFingerprint calls f with the fingerprint and seq of each row of
// processed_messages that where (a WHERE clause, and an order) selects.
func eachFingerprint(q query, f func(fp uint64, seq int64), where string, args ...any) error {
	return eachRow(q, func(rows *sql.Rows) error {
		var seq int64
		var id string
		if err := rows.Scan(&seq, &id); err != nil {
			return err
		}
		f(fingerprint(id), seq)
		return nil
	}, `SELECT seq, message_id FROM processed_messages `+where, args...)
}

// eachRow calls f on each row of a query.
func eachRow(q query, f func(*sql.Rows) error, query string, args ...any) error {
	rows, err := q(query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := f(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// rowOf says where the ledger row of id is, for the reader: "<table> WHERE
// <key> = ?" and the key, or "" with sql.ErrNoRows if there is none.
func (s *Store) rowOf(ctx context.Context, id string) (from string, key any, err error) {
	var one int
	err = s.reader.QueryRowContext(ctx, `SELECT 1 FROM processed_messages_v1 WHERE message_id = ?`, id).Scan(&one)
	if err == nil {
		return "processed_messages_v1 WHERE message_id = ?", id, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", nil, err
	}
	found, err := s.lookupIDs(func(query string, args ...any) (*sql.Rows, error) {
		return s.reader.QueryContext(ctx, query, args...)
	}, []string{id})
	if err != nil {
		return "", nil, err
	}
	if k := found[id]; k != nil {
		return "processed_messages WHERE seq = ?", k.seq, nil
	}
	return "", nil, sql.ErrNoRows
}

// SealRuns writes the runs of fingerprints of every whole run of rows
// above the newest, one transaction a run, and returns how many. Batches
// seal runs as they go; a tool that wrote rows into processed_messages
// itself (the bench's pre-fill) calls it before batches run, which would
// otherwise hold its rows in memory and seal them one run a batch.
func (s *Store) SealRuns(ctx context.Context) (int, error) {
	sealed := 0
	for {
		done, err := s.sealOne(ctx)
		if err != nil || !done {
			return sealed, err
		}
		sealed++
	}
}

// sealOne seals the next whole run, if there is one.
func (s *Store) sealOne(ctx context.Context) (bool, error) {
	tx, err := s.write(ctx)
	if err != nil {
		return false, interpret(err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	q := func(query string, args ...any) (*sql.Rows, error) { return tx.QueryContext(ctx, query, args...) }
	var sealedTo, top int64
	if err := queryRow(q, []any{&sealedTo, &top}, `SELECT coalesce((SELECT max(last) FROM processed_runs), 0),
		coalesce((SELECT max(seq) FROM processed_messages), 0)`); err != nil {
		return false, err
	}
	first, last := sealedTo+1, sealedTo+runRows
	if top < last {
		return false, nil
	}
	var pairs [][2]uint64
	err = eachFingerprint(q, func(fp uint64, seq int64) {
		pairs = append(pairs, [2]uint64{fp, uint64(seq)})
	}, `WHERE seq BETWEEN ? AND ?`, first, last)
	if err != nil {
		return false, err
	}
	sortPairs(pairs)
	exec := func(query string, args ...any) error { _, err := tx.ExecContext(ctx, query, args...); return err }
	if err := writeRun(q, exec, first, last, pairs); err != nil {
		return false, err
	}
	return true, interpret(tx.Commit())
}

// WarmIndex reads the index of ids (the runs' fingerprints, the newest
// rows) into memory now, on a reader, as the first batch after a start or
// a take-over would: about 0.2 s a million ids. A consumer calls it before
// its first batch, whose deadline it would otherwise spend.
func (s *Store) WarmIndex(ctx context.Context) error {
	s.ids.mu.Lock()
	defer s.ids.mu.Unlock()
	if err := s.ids.sync(func(query string, args ...any) (*sql.Rows, error) { return s.reader.QueryContext(ctx, query, args...) }); err != nil {
		return fmt.Errorf("ledger: read the index of ids: %w", interpret(err))
	}
	return nil
}
