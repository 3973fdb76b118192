package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/jsretry"
	"github.com/jetledger/jetledger/group"
	"github.com/jetledger/jetledger/natsconn"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Group runs the partitions as one member of a group of hosts that run
// the same command (Partitions.Group): the group spreads the partitions
// and their standbys over its members (package group), and each member
// runs the partitions assigned to it, as their owner or standby, and
// hands a partition over when the assignment moves it.
type Group struct {
	// Name of the group. Required.
	Name string
	// Standbys each partition has on other members. Default 0.
	Standbys int
	// Member names this run in the group. Default host:pid:tag.
	Member string
	// Heartbeat, MemberTTL and StableAfter: group.Config's. Defaults
	// group.HeartbeatDefault, the lease's TTL within 3 heartbeats and
	// group.MemberTTLDefault, group.StableAfterDefault.
	Heartbeat, MemberTTL, StableAfter time.Duration
	// HandOver bounds how long a stopping member waits for the members
	// its partitions move to to be ready (their copies caught up) before
	// it stops them anyway (their standbys then take them over as from a
	// lost owner). Default HandOverDefault.
	HandOver time.Duration
}

// memberTTL is MemberTTL, by default the partitions' lease TTL within 3
// heartbeats and group.MemberTTLDefault: a lost member's partitions are
// reassigned by the time their leases expire, so its standbys take them
// over then, not a member TTL later.
func (g Group) memberTTL(cfg Config) time.Duration {
	if g.MemberTTL != 0 {
		return g.MemberTTL
	}
	lease := LeaseTTL(cfg.Consumer.Plan.WithDefaults().AckWait())
	return min(max(lease, 3*cmp.Or(g.Heartbeat, group.HeartbeatDefault)), group.MemberTTLDefault)
}

// HandOverDefault is Group.HandOver's default.
const HandOverDefault = time.Minute

// readyLag is the most entries a copy may lack to be taken over to in a
// hand-over: the owner stops once the copy has at most this to apply.
const readyLag = 10

// partRun is one partition's run on this member.
type partRun struct {
	cancel  context.CancelFunc
	done    chan struct{}
	err     error
	handing bool // cancelled to hand the partition over

	mu   sync.Mutex
	role changelog.Role
	lag  uint64
}

func (r *partRun) seen() (changelog.Role, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.role, r.lag
}

func (r *partRun) finished() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// groupRun is a member's partitions and the loop that keeps them as the
// assignment says.
type groupRun struct {
	cfg   Config
	g     Group
	n     int
	m     *group.Member
	start func(ctx context.Context, p Partition) error
	part  func(i int) Partition
	runs  map[int]*partRun
	seq   int

	metrics *groupMetrics // nil without Config.Metrics
	handed  int           // partitions handed over while owned
}

// runGroupOn is runGroup over its own connection to conn.
func runGroupOn(ctx context.Context, cfg Config, g Group, conn natsconn.Config, n int, part func(int) Partition, start func(context.Context, Partition) error) error {
	nc, js, err := cfg.Dial(ctx, conn)
	if err != nil {
		return cfg.Say(step(StepConnect, err))
	}
	defer nc.Close()
	return runGroup(ctx, cfg, g, nc, js, n, part, start)
}

// runGroup joins the group and runs the partitions assigned to this
// member until ctx ends; then it leaves, handing its partitions over.
func runGroup(ctx context.Context, cfg Config, g Group, nc *nats.Conn, js jetstream.JetStream, n int, part func(i int) Partition, start func(context.Context, Partition) error) error {
	gcfg := group.Config{Name: g.Name, Partitions: n, Standbys: g.Standbys, Member: g.Member,
		Stream: cfg.Stream.Name, Durable: cmp.Or(cfg.Consumer.Durable, consumer.DurableDefault),
		Heartbeat: g.Heartbeat, MemberTTL: g.memberTTL(cfg), StableAfter: g.StableAfter, Replicas: max(cfg.Stream.Limits.Replicas, 1), Logger: cfg.Logger, Files: func() []int { return heldFiles(n, part) }}
	// A cluster electing a leader, or a node just restarted, does not
	// answer at once: waited for (the group nemesis's host that exited 1
	// on "bucket JETLEDGER_GROUPS: context deadline exceeded").
	m, err := jsretry.Call(ctx, cfg.Logger, "join group "+g.Name, func(ctx context.Context) (*group.Member, error) { return group.Join(ctx, js, gcfg) })
	if ctx.Err() != nil {
		if m != nil {
			m.Close()
		}
		return nil
	}
	if err != nil {
		return step(StepLedger, err)
	}
	defer m.Close()
	// Past a take-over (the lease's TTL, the member's, the damping), a
	// partition without an owner needs a person.
	grace := LeaseTTL(cfg.Consumer.Plan.WithDefaults().AckWait()) + g.memberTTL(cfg) + cmp.Or(g.StableAfter, group.StableAfterDefault)
	metrics, err := serveGroup(&cfg, nc, g, grace)
	if err != nil {
		return err
	}
	defer metrics.close()
	cfg.Logger.InfoContext(ctx, "joined the group", "group", g.Name, "member", m.Name(), "partitions", n, "standbys", g.Standbys)
	r := &groupRun{cfg: cfg, g: g, n: n, m: m, start: start, part: part, runs: map[int]*partRun{}, metrics: metrics}
	tick := time.NewTicker(cmp.Or(g.Heartbeat, group.HeartbeatDefault))
	defer tick.Stop()
	for ctx.Err() == nil {
		// Another shape than the group's members run is refused: left out,
		// it would run nothing while it seemed to run.
		err := m.Mismatch()
		if err == nil {
			err = r.reconcile(false)
		}
		if err != nil {
			r.stopAll()
			return step(StepLedger, err)
		}
		select {
		case <-ctx.Done():
		case <-m.Changed():
		case <-tick.C:
		}
	}
	return r.leave()
}

// reconcile starts the partitions assigned here, stops those no longer
// assigned here, and hands over those this member owns that are assigned
// to another member whose copy is ready. Leaving, nothing is started. A
// partition's run that failed fails the member.
func (r *groupRun) reconcile(leaving bool) error {
	a, me := r.m.Assignment(), r.m.ID()
	members := r.m.Members()
	for i := range r.n {
		run := r.runs[i]
		if run != nil && run.finished() {
			if run.err != nil && !run.handing {
				return fmt.Errorf("partition %d: %w", i, run.err)
			}
			delete(r.runs, i)
			r.m.Report(i, group.Part{})
			run = nil
		}
		want := a.Has(me, i) && !leaving
		switch {
		case run == nil && want:
			r.runs[i] = r.launch(i)
		case run == nil || run.handing:
		case !want && !r.owns(run):
			r.handOver(i, run, "no longer assigned here")
		case a.Owner(i) != me && r.owns(run) && r.readyAt(members, a.Owner(i), i):
			r.handOver(i, run, "assigned to "+a.Owner(i))
		}
		if run := r.runs[i]; run != nil {
			role, lag := run.seen()
			r.m.Report(i, group.Part{Role: string(role), Lag: lag})
		}
	}
	r.metrics.observe(r.n, a, members, r.runs, r.handed)
	return nil
}

func (r *groupRun) owns(run *partRun) bool {
	role, _ := run.seen()
	return role == changelog.RoleOwner || role == changelog.RoleTaking
}

// readyAt says whether member's copy of partition i follows its log with
// at most readyLag entries to apply.
func (r *groupRun) readyAt(members map[string]group.Record, member string, i int) bool {
	rec, ok := members[member]
	p := rec.Parts[i]
	return ok && p.Role == string(changelog.RoleFollowing) && p.Lag <= readyLag
}

func (r *groupRun) handOver(i int, run *partRun, why string) {
	role, _ := run.seen()
	r.cfg.Logger.Info("group: stopping the partition here", "group", r.g.Name, "partition", i, "role", role, "why", why)
	if r.owns(run) {
		r.handed++
	}
	run.handing = true
	run.cancel()
}

// launch starts partition i as a standby that takes its lease only while
// the assignment names this member its owner.
func (r *groupRun) launch(i int) *partRun {
	r.seq++
	ctx, cancel := context.WithCancel(context.Background())
	run := &partRun{cancel: cancel, done: make(chan struct{}), role: changelog.RoleNew}
	p := r.part(i)
	p.owner = &Owner{Standby: true, Name: fmt.Sprintf("%s/p%d.%d", r.m.Name(), i, r.seq),
		MayTake: func() bool { return r.m.Assignment().Owner(i) == r.m.ID() },
		Observe: func(role changelog.Role, lag uint64) {
			run.mu.Lock()
			run.role, run.lag = role, lag
			run.mu.Unlock()
		}}
	go func() {
		defer close(run.done)
		run.err = r.start(ctx, p)
	}()
	return run
}

// leave says this member is leaving, and hands its partitions over: a
// standby's at once, an owner's once the member it moves to is ready, or
// after HandOver; alone in the group, it stops them at once.
func (r *groupRun) leave() error {
	ctx, cancel := context.WithTimeout(context.Background(), cmp.Or(r.g.HandOver, HandOverDefault))
	defer cancel()
	if err := r.m.Leave(ctx); err != nil {
		r.cfg.Logger.Warn("group: could not say this member leaves; its partitions stop now", "group", r.g.Name, "err", err)
		r.stopAll()
		return nil
	}
	r.cfg.Logger.Info("group: leaving: handing the partitions over", "group", r.g.Name, "member", r.m.Name(), "running", len(r.runs), "others", r.others())
	tick := time.NewTicker(cmp.Or(r.g.Heartbeat, group.HeartbeatDefault))
	defer tick.Stop()
	for len(r.runs) > 0 && ctx.Err() == nil && r.others() {
		_ = r.reconcile(true) // failures now are the stop's
		select {
		case <-ctx.Done():
		case <-r.m.Changed():
		case <-tick.C:
		}
	}
	if len(r.runs) > 0 {
		r.cfg.Logger.Info("group: leaving: stopping the partitions left", "group", r.g.Name, "running", len(r.runs), "others", r.others(), "err", ctx.Err())
	}
	r.stopAll()
	return nil
}

// others says whether another member of the group is present, not
// leaving: one to hand the partitions to.
func (r *groupRun) others() bool {
	for id, rec := range r.m.Members() {
		if id != r.m.ID() && !rec.Leaving {
			return true
		}
	}
	return false
}

// stopAll stops every partition's run and waits for them.
func (r *groupRun) stopAll() {
	var errs []error
	for i, run := range r.runs {
		run.cancel()
		<-run.done
		if run.err != nil && !errors.Is(run.err, context.Canceled) {
			errs = append(errs, fmt.Errorf("partition %d: %w", i, run.err))
		}
	}
	if len(errs) > 0 {
		r.cfg.Logger.Warn("group: partitions ended with errors as the member stopped", "group", r.g.Name, "err", errors.Join(errs...))
	}
}

// heldFiles are the partitions whose ledger file is in this run's
// directory now, for its record at each heartbeat: one of them whose
// assigned copies all wait may be given to this member (group.Config.Files).
func heldFiles(n int, part func(i int) Partition) []int {
	var held []int
	for i := range n {
		if _, err := os.Stat(part(i).DB); err == nil {
			held = append(held, i)
		}
	}
	return held
}
