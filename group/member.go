package group

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func randomTag() string { return rand.Text()[:6] }

// seen is a member's record as this member last received it.
type seen struct {
	rec Record
	at  time.Time // its receipt, by this host's clock
}

// Member is this run's membership of its group: it beats, watches the
// others and the assignment, and, while it is the coordinator, writes
// the assignment when the members change.
type Member struct {
	cfg Config
	js  jetstream.JetStream
	kv  jetstream.KeyValue
	id  string

	mu        sync.Mutex
	parts     map[int]Part
	leaving   bool
	beat      uint64
	beatAt    time.Time       // when the last heartbeat was written
	since     time.Time       // when this member joined, or joined again after a break
	members   map[string]seen // by id
	assign    Assignment
	watchFrom time.Time // when the watch had its first values
	sawAssign bool      // the watch begun last has shown the assignment
	changed   chan struct{}

	stop context.CancelFunc
	done sync.WaitGroup
}

// Join joins the group: its bucket made if need be, this member's first
// heartbeat written and the watch begun. Close leaves it.
func Join(ctx context.Context, js jetstream.JetStream, cfg Config) (*Member, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	kv, err := ensureBucket(ctx, js, cfg.Replicas, cfg.MemberTTL)
	if err != nil {
		return nil, err
	}
	m := &Member{cfg: cfg, js: js, kv: kv, id: ID(cfg.Member), parts: map[int]Part{}, members: map[string]seen{}, changed: make(chan struct{}, 1)}
	// The watch outlives ctx: a member told to stop still watches while
	// it hands its partitions over, until Close.
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	w, err := kv.WatchFiltered(runCtx, []string{cfg.Name + ".>"})
	if err != nil {
		stop()
		return nil, fmt.Errorf("group %s: watch: %w", cfg.Name, err)
	}
	if err := m.heartbeat(ctx); err != nil {
		stop()
		_ = w.Stop()
		return nil, err
	}
	m.stop = stop
	m.done.Go(func() { m.watch(runCtx, w) })
	m.done.Go(func() { m.beatAndCoordinate(runCtx) })
	return m, nil
}

// ID is this member's id, as the assignment names it.
func (m *Member) ID() string { return m.id }

// Name is this member's name (Config.Member).
func (m *Member) Name() string { return m.cfg.Member }

// Assignment is the group's assignment as last read.
func (m *Member) Assignment() Assignment {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.assign
}

// Changed is signalled when the assignment or a member's record changes.
func (m *Member) Changed() <-chan struct{} { return m.changed }

// Report sets what the next heartbeats say of partition i; a zero Part
// (no role) drops it.
func (m *Member) Report(i int, p Part) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p.Role == "" {
		delete(m.parts, i)
		return
	}
	m.parts[i] = p
}

// Members are the members present now (a heartbeat received within
// MemberTTL), by id.
func (m *Member) Members() map[string]Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]Record{}
	for id, s := range m.members {
		if time.Since(s.at) < m.cfg.MemberTTL {
			out[id] = s.rec
		}
	}
	return out
}

// Leave says this member is leaving: the coordinator assigns its
// partitions to the others, and this member hands them over (its caller
// does) before it closes.
func (m *Member) Leave(ctx context.Context) error {
	m.mu.Lock()
	m.leaving = true
	m.mu.Unlock()
	return m.heartbeat(ctx)
}

// Close stops the heartbeats and the watch and deletes this member's key:
// the group sees it go at once.
func (m *Member) Close() {
	m.stop()
	m.done.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.MemberTTL)
	defer cancel()
	_ = m.kv.Delete(ctx, memberKey(m.cfg.Name, m.id)) // lost: its TTL lets it go
}

func (m *Member) heartbeat(ctx context.Context) error {
	var files []int
	if m.cfg.Files != nil {
		files = m.cfg.Files() // the file system's, outside the lock
	}
	m.mu.Lock()
	if !m.beatAt.IsZero() && time.Since(m.beatAt) >= m.cfg.MemberTTL {
		// Out of the group for a member TTL (a pause, a cut): a member
		// again from now, damped as a new one (helper-30: a member back
		// from a pause was given partitions under a second after).
		m.beat = 0
	}
	if m.beat == 0 {
		m.since = time.Now()
	}
	m.beat++
	rec := Record{Member: m.cfg.Member, Beat: m.beat, Heartbeat: m.cfg.Heartbeat, Up: time.Since(m.since), Partitions: m.cfg.Partitions,
		Standbys: m.cfg.Standbys, Stream: m.cfg.Stream, Durable: m.cfg.Durable, Leaving: m.leaving, Parts: maps.Clone(m.parts), Files: files}
	m.mu.Unlock()
	bctx, cancel := context.WithTimeout(ctx, m.cfg.Heartbeat)
	defer cancel()
	err := putRecord(bctx, m.js, memberKey(m.cfg.Name, m.id), rec, m.cfg.MemberTTL)
	if err != nil && bucketGone(bctx, m.js) {
		// Deleted (an admin): made again, and the beat written to it. The
		// assignment went with it; the coordinator writes one again from
		// what the members run.
		if _, err = ensureBucket(bctx, m.js, m.cfg.Replicas, m.cfg.MemberTTL); err == nil {
			m.cfg.Logger.WarnContext(ctx, "group: the bucket was deleted, and is made again", "group", m.cfg.Name, "bucket", Bucket)
			err = putRecord(bctx, m.js, memberKey(m.cfg.Name, m.id), rec, m.cfg.MemberTTL)
		}
	}
	if err != nil {
		return fmt.Errorf("group %s: heartbeat of %s: %w", m.cfg.Name, m.cfg.Member, err)
	}
	m.mu.Lock()
	m.beatAt = time.Now()
	m.mu.Unlock()
	return nil
}

// bucketGone says whether the bucket's stream is not there (a definite
// answer: a server that does not answer is no reason to make it).
func bucketGone(ctx context.Context, js jetstream.JetStream) bool {
	_, err := js.Stream(ctx, "KV_"+Bucket)
	return errors.Is(err, jetstream.ErrStreamNotFound)
}

// watch keeps the members' records and the assignment as they change.
// A watch silent for MemberTTL (not even this member's own heartbeats
// came back: its bucket deleted, its consumer lost) is begun again.
func (m *Member) watch(ctx context.Context, w jetstream.KeyWatcher) {
	quiet := time.NewTimer(m.cfg.MemberTTL)
	defer func() {
		quiet.Stop()
		if w != nil {
			_ = w.Stop()
		}
	}()
	for {
		var updates <-chan jetstream.KeyValueEntry
		if w != nil {
			updates = w.Updates()
		}
		select {
		case <-ctx.Done():
			return
		case <-quiet.C:
			if w != nil {
				_ = w.Stop()
			}
			m.mu.Lock()
			m.sawAssign = false // until its values at the start are in
			m.mu.Unlock()
			var err error
			if w, err = m.kv.WatchFiltered(ctx, []string{m.cfg.Name + ".>"}); err != nil {
				w = nil
				m.cfg.Logger.WarnContext(ctx, "group: the watch of the members is lost; trying again", "group", m.cfg.Name, "err", err)
			}
			quiet.Reset(m.cfg.MemberTTL)
		case e, ok := <-updates:
			if !ok {
				w = nil // ended: begun again when quiet
				continue
			}
			quiet.Reset(m.cfg.MemberTTL)
			m.apply(ctx, e)
		}
	}
}

// apply takes one entry of the watch (nil: the values there at its start
// are all in).
func (m *Member) apply(ctx context.Context, e jetstream.KeyValueEntry) {
	prefix := m.cfg.Name + ".m."
	m.mu.Lock()
	switch {
	case e == nil:
		if m.watchFrom.IsZero() {
			m.watchFrom = time.Now()
		}
		if !m.sawAssign { // gone with its bucket (deleted, made again): written again
			m.assign.Revision, m.assign.Members = 0, nil
		}
	case e.Key() == assignmentKey(m.cfg.Name) && e.Operation() == jetstream.KeyValuePut:
		m.sawAssign = true
		if a, err := decodeAssignment(e); err == nil {
			m.assign = a
		} else {
			m.cfg.Logger.WarnContext(ctx, "group: an assignment that cannot be read; kept the last", "group", m.cfg.Name, "err", err)
		}
	case e.Key() == assignmentKey(m.cfg.Name): // deleted (an admin): made again from the members
		m.assign.Revision, m.assign.Members = 0, nil
	case strings.HasPrefix(e.Key(), prefix) && e.Operation() == jetstream.KeyValuePut:
		var rec Record
		if err := json.Unmarshal(e.Value(), &rec); err == nil {
			m.members[strings.TrimPrefix(e.Key(), prefix)] = seen{rec: rec, at: time.Now()}
		}
	case strings.HasPrefix(e.Key(), prefix):
		delete(m.members, strings.TrimPrefix(e.Key(), prefix))
	}
	m.mu.Unlock()
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// beatAndCoordinate beats every Heartbeat and, while this member is the
// coordinator, writes the assignment its members call for.
func (m *Member) beatAndCoordinate(ctx context.Context) {
	t := time.NewTicker(m.cfg.Heartbeat)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := m.heartbeat(ctx)
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			m.cfg.Logger.WarnContext(ctx, "group: the heartbeat failed; trying again", "group", m.cfg.Name, "member", m.cfg.Member, "err", err)
		case err == nil && failing:
			m.cfg.Logger.InfoContext(ctx, "group: heartbeats go again", "group", m.cfg.Name, "member", m.cfg.Member)
		}
		failing = err != nil
		if err == nil {
			m.coordinate(ctx)
		}
	}
}

// coordinate writes a new assignment if this member is the coordinator
// and the members it is for have changed.
func (m *Member) coordinate(ctx context.Context) {
	next, ok := m.nextAssignment()
	if !ok {
		return
	}
	b, err := json.Marshal(next)
	if err == nil {
		key := assignmentKey(m.cfg.Name)
		if next.Revision == 0 {
			_, err = m.kv.Create(ctx, key, b)
		} else {
			_, err = m.kv.Update(ctx, key, b, next.Revision)
		}
	}
	if errors.Is(err, jetstream.ErrKeyExists) {
		// Another wrote it first (the watch brings it), or the key is gone
		// with a bucket deleted and made again: created at the next look.
		if _, gerr := m.kv.Get(ctx, assignmentKey(m.cfg.Name)); errors.Is(gerr, jetstream.ErrKeyNotFound) {
			m.mu.Lock()
			m.assign.Revision = 0
			m.mu.Unlock()
		}
		return
	}
	if err != nil {
		m.cfg.Logger.WarnContext(ctx, "group: the assignment could not be written; trying again", "group", m.cfg.Name, "err", err)
		return
	}
	m.cfg.Logger.InfoContext(ctx, "group: assigned the partitions", "group", m.cfg.Name, "members", next.Members, "epoch", next.Epoch)
}

func (m *Member) sameShape(partitions, standbys int) bool {
	return partitions == m.cfg.Partitions && standbys == m.cfg.Standbys
}

// odd says whether this member's shape (Partitions, Standbys) is not the
// group's: the assignment's, while a present member other than this one
// keeps to it. An odd member neither coordinates nor is assigned; it once
// wrote its own assignment, the coordinator wrote the group's back, and
// partitions moved every second (helper-30). With m.mu held.
func (m *Member) odd(now time.Time) bool {
	a := m.assign
	if a.Revision == 0 || m.sameShape(a.Partitions, a.Standbys) {
		return false
	}
	for id, s := range m.members {
		if id != m.id && now.Sub(s.at) < m.cfg.MemberTTL && !s.rec.Leaving && s.rec.Partitions == a.Partitions && s.rec.Standbys == a.Standbys {
			return true
		}
	}
	return false
}

// Mismatch is an ErrShape naming the group's shape while this member's is
// not it (odd), once the watch has shown the group; nil otherwise.
func (m *Member) Mismatch() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.watchFrom.IsZero() || !m.odd(time.Now()) {
		return nil
	}
	return fmt.Errorf("%w: group %s has %d partitions with %d standbys each, and members run them so; this run says %d and %d: give every member the same, or stop them all to change it",
		ErrShape, m.cfg.Name, m.assign.Partitions, m.assign.Standbys, m.cfg.Partitions, m.cfg.Standbys)
}

// running is the spread the members say they run (their records'
// parts), for an assignment made without the one before (its key
// deleted): each partition's owner and followers stay where they are.
func (m *Member) running() []Slot {
	slots := make([]Slot, m.cfg.Partitions)
	for _, id := range slices.Sorted(maps.Keys(m.members)) {
		for i, p := range m.members[id].rec.Parts {
			switch {
			case i < 0 || i >= len(slots):
			case p.Role == "owner" || p.Role == "taking":
				slots[i].Owner = id
			case p.Role == "following":
				slots[i].Standbys = append(slots[i].Standbys, id)
			}
		}
	}
	return slots
}

// nextAssignment is the assignment to write, if this member coordinates
// (its own heartbeat came back through the watch within MemberTTL, the
// watch has run that long, and it is the first present member by id)
// and the eligible members are not those of the assignment now.
func (m *Member) nextAssignment() (Assignment, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	mine, ok := m.members[m.id]
	if !ok || now.Sub(mine.at) >= m.cfg.MemberTTL || m.watchFrom.IsZero() || now.Sub(m.watchFrom) < m.cfg.MemberTTL || m.leaving || m.odd(now) {
		return Assignment{}, false
	}
	// The damping holds a member back only from joining the assignment:
	// one in it stays while present, so members all back from an outage
	// (each damped as new again) do not shrink it one by one.
	var eligible []string
	for id, s := range m.members {
		present := now.Sub(s.at) < m.cfg.MemberTTL && !s.rec.Leaving && m.sameShape(s.rec.Partitions, s.rec.Standbys)
		if present && id < m.id {
			return Assignment{}, false // not the coordinator
		}
		if present && (s.rec.Up >= m.cfg.StableAfter || slices.Contains(m.assign.Members, id)) {
			eligible = append(eligible, id)
		}
	}
	slices.Sort(eligible)
	a := m.assign
	if len(eligible) == 0 {
		return Assignment{}, false
	}
	if slices.Equal(eligible, a.Members) && m.sameShape(a.Partitions, a.Standbys) {
		slots, ok := m.rescued(a.Slots, eligible)
		if ok {
			m.cfg.Logger.Warn("group: every assigned copy of a partition waits: it is given to a member holding a file of it", "group", m.cfg.Name, "epoch", a.Epoch+1)
		}
		return Assignment{Partitions: a.Partitions, Standbys: a.Standbys, Members: a.Members, Slots: slots, Epoch: a.Epoch + 1, By: m.id, Revision: a.Revision}, ok
	}
	prev := a.Slots
	if a.Partitions != m.cfg.Partitions || len(prev) == 0 {
		prev = m.running()
	}
	return Assignment{Partitions: m.cfg.Partitions, Standbys: m.cfg.Standbys, Members: eligible,
		Slots: Assign(m.cfg.Partitions, m.cfg.Standbys, eligible, prev), Epoch: a.Epoch + 1, By: m.id, Revision: a.Revision}, true
}

// rescued gives each slot whose owner's copy waits (it says so in its
// record: a log purged past it, a copy lacking what was acknowledged) to
// a standby of the slot whose copy follows; where every copy of the slot
// waits, to the first eligible member, by id, that is not in the slot and
// holds a ledger file of the partition: its copy may be the one that goes
// on (the lost owner back on its files), where the group would otherwise
// leave the partition unowned for good. Those in the slot stay as its
// standbys, so each member is tried once; the lifecycle decides whether a
// copy may own, as it does for a static standby. The next assignment
// (Assign) trims the standbys again.
func (m *Member) rescued(slots []Slot, eligible []string) ([]Slot, bool) {
	var out []Slot
	for i, s := range slots {
		if s.Owner == "" || !m.allWait(i, []string{s.Owner}) {
			continue
		}
		next := Slot{}
		if f := slices.IndexFunc(s.Standbys, func(id string) bool { return m.says(id, i, "following") }); f >= 0 {
			next = Slot{Owner: s.Standbys[f], Standbys: append([]string{s.Owner}, slices.Delete(slices.Clone(s.Standbys), f, f+1)...)}
		} else if in := append([]string{s.Owner}, s.Standbys...); m.allWait(i, in) {
			for _, id := range eligible {
				if !slices.Contains(in, id) && slices.Contains(m.members[id].rec.Files, i) {
					next = Slot{Owner: id, Standbys: in}
					break
				}
			}
		}
		if next.Owner == "" {
			continue
		}
		if out == nil {
			out = slices.Clone(slots)
		}
		out[i] = next
	}
	return out, out != nil
}

// allWait says whether every member of ids says its copy of partition i waits.
func (m *Member) allWait(i int, ids []string) bool {
	for _, id := range ids {
		if !m.says(id, i, "waiting") {
			return false
		}
	}
	return true
}

// says whether member id says its copy of partition i is in role.
func (m *Member) says(id string, i int, role string) bool {
	st, ok := m.members[id]
	return ok && st.rec.Parts[i].Role == role
}
