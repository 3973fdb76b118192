package service

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/group"
	"github.com/jetledger/jetledger/health"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
)

// NeedOwnerless is the health need of a group's partitions that nobody
// has owned for longer than a take-over takes.
const NeedOwnerless = "partition_without_owner"

// groupMetrics serves a member's /metrics and /healthz: the group as
// this member sees it, and the role of each partition it runs.
type groupMetrics struct {
	members, epoch, moves prometheus.Gauge
	ownerless             prometheus.Gauge
	role                  *prometheus.GaugeVec
	lag                   *prometheus.GaugeVec
	stop                  context.CancelFunc
	served                <-chan struct{}

	mu    sync.Mutex
	since map[int]time.Time // when each partition was first seen without an owner
	grace time.Duration
	count int // ownerless past grace, at the last look
	do    string
}

// serveGroup serves cfg.Metrics (or MetricsAddr) for the group's member;
// nil when neither is set.
func serveGroup(cfg *Config, nc *nats.Conn, g Group, grace time.Duration) (*groupMetrics, error) {
	release, err := cfg.listenMetrics()
	if err != nil || cfg.Metrics == nil {
		return nil, err
	}
	if release == nil { // the caller's listener: the caller's to close
		release = func() {}
	}
	m := &groupMetrics{
		members: prometheus.NewGauge(prometheus.GaugeOpts{Name: "jetledger_group_members", Help: "members of the group this member sees present (a heartbeat within the member TTL)"}),
		epoch:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "jetledger_group_assignment_epoch", Help: "the group's assignments written so far: it moves at each change of members"}),
		moves:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "jetledger_group_handovers", Help: "partitions this member has handed over (stopped owning for another member) since it started"}),
		ownerless: prometheus.NewGauge(prometheus.GaugeOpts{Name: "jetledger_group_partitions_without_owner",
			Help: "partitions of the group no member has owned for longer than a take-over takes: nothing consumes them"}),
		role: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "jetledger_group_partition_role",
			Help: "1 for the role (owner, following, ...) of each partition this member runs"}, []string{"partition", "role"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "jetledger_group_standby_lag_entries",
			Help: "changelog entries this member's copy of the partition had to apply at its last look"}, []string{"partition"}),
		since: map[int]time.Time{}, grace: grace,
		do: fmt.Sprintf("see jetledger group status --group %s --stream %s", g.Name, cfg.Stream.Name),
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.members, m.epoch, m.moves, m.ownerless, m.role, m.lag)
	h, err := health.New(health.Config{Logger: cfg.Logger}, health.NATS(nc), health.Probe{Name: "group", Check: m.check})
	if err != nil {
		release()
		return nil, err
	}
	var ctx context.Context
	ctx, m.stop = context.WithCancel(context.Background())
	served := serveHTTP(ctx, cfg.Logger, cfg.Metrics, cfg.MetricsCert, cfg.MetricsKey, metricsMux(reg, h))
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-served
		release()
	}()
	m.served = done
	return m, nil
}

// check is the probe "group": partitions without an owner past the grace
// need a person.
func (m *groupMetrics) check(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.count == 0 {
		return nil
	}
	return &health.AttentionError{Needs: []health.Need{{Kind: NeedOwnerless, Count: int64(m.count), Do: m.do}}}
}

// observe sets the gauges from the member's view and its runs.
func (m *groupMetrics) observe(n int, a group.Assignment, members map[string]group.Record, runs map[int]*partRun, handed int) {
	if m == nil {
		return
	}
	m.members.Set(float64(len(members)))
	m.epoch.Set(float64(a.Epoch))
	m.moves.Set(float64(handed))
	m.role.Reset()
	m.lag.Reset()
	for i, run := range runs {
		role, lag := run.seen()
		m.role.WithLabelValues(strconv.Itoa(i), string(role)).Set(1)
		m.lag.WithLabelValues(strconv.Itoa(i)).Set(float64(lag))
	}
	owned := map[int]bool{}
	for _, rec := range members {
		for i, p := range rec.Parts {
			owned[i] = owned[i] || p.Role == string(changelog.RoleOwner) || p.Role == string(changelog.RoleTaking)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.count = 0
	for i := range n {
		if owned[i] {
			delete(m.since, i)
			continue
		}
		if _, ok := m.since[i]; !ok {
			m.since[i] = time.Now()
		}
		if time.Since(m.since[i]) > m.grace {
			m.count++
		}
	}
	m.ownerless.Set(float64(m.count))
}

func (m *groupMetrics) close() {
	if m == nil {
		return
	}
	m.stop()
	<-m.served
}
