package service

import (
	"context"
	"net/http"
	"sync/atomic"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/health"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
)

// ownedMetrics serves Config.Metrics for the whole of an owned run: the
// Service serves /metrics and /healthz only while it runs, which is while
// this process owns the partition, so here they are the standby's in
// between, with the gauges of the partition's ownership in both.
type ownedMetrics struct {
	standby http.Handler
	handler atomic.Pointer[http.Handler]
	owner   prometheus.Gauge
	lag     prometheus.Gauge
	waiting prometheus.Gauge
	role    *prometheus.GaugeVec
	why     atomic.Pointer[error] // the copy's wait, nil while it goes on
	stop    context.CancelFunc
	served  <-chan struct{}
}

// serveOwned starts serving cfg.Metrics, the standby's handler first.
func serveOwned(cfg Config, nc *nats.Conn) (*ownedMetrics, error) {
	m := &ownedMetrics{
		owner: prometheus.NewGauge(prometheus.GaugeOpts{Name: "jetledger_changelog_owner",
			Help: "1 while this process owns the partition (holds its lease and writes its changelog), 0 while it stands by"}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{Name: "jetledger_changelog_standby_lag_entries",
			Help: "changelog entries the standby's copy of the ledger has not applied yet, at its last look (0 while it owns the partition)"}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{Name: "jetledger_changelog_waiting",
			Help: "1 while this host's copy of the partition can neither follow its log, be restored nor begin the log (the log says why: the owner's first snapshot, a fuller copy elsewhere, or a person)"}),
		role: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "jetledger_changelog_role",
			Help: "1 for the role this run has in its partition's lifecycle (new, waiting, restoring, following, taking, owner, fenced, stopped), 0 for the others"}, []string{"role"}),
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.owner, m.lag, m.waiting, m.role)
	h, err := health.New(health.Config{Logger: cfg.Logger}, health.NATS(nc), health.Probe{Name: "changelog", Check: m.waitingCheck})
	if err != nil {
		return nil, err
	}
	m.standby = metricsMux(reg, h)
	m.mount(nil)
	var ctx context.Context
	ctx, m.stop = context.WithCancel(context.Background())
	m.served = serveHTTP(ctx, cfg.Logger, cfg.Metrics, cfg.MetricsCert, cfg.MetricsKey,
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*m.handler.Load()).ServeHTTP(w, r) }))
	return m, nil
}

// mount serves the owner's Service's handler, or with nil the standby's.
func (m *ownedMetrics) mount(h http.Handler) {
	if h == nil {
		h = m.standby
		m.owner.Set(0)
	} else {
		m.owner.Set(1)
		m.lag.Set(0)
	}
	m.handler.Store(&h)
}

// setWaiting is changelog.Config.Waiting: the copy waits (why) or goes on (nil).
func (m *ownedMetrics) setWaiting(why error) {
	if why == nil {
		m.waiting.Set(0)
		m.why.Store(nil)
		return
	}
	m.waiting.Set(1)
	m.why.Store(&why)
}

// waitingCheck is the health probe "changelog": unhealthy while the copy waits.
func (m *ownedMetrics) waitingCheck(context.Context) error {
	if why := m.why.Load(); why != nil {
		return *why
	}
	return nil
}

// setRole is changelog.Roles' observer: the role moved to.
func (m *ownedMetrics) setRole(r changelog.Role) {
	for _, x := range []changelog.Role{changelog.RoleNew, changelog.RoleWaiting, changelog.RoleRestoring, changelog.RoleFollowing,
		changelog.RoleTaking, changelog.RoleOwner, changelog.RoleFenced, changelog.RoleStopped} {
		m.role.WithLabelValues(string(x)).Set(b2f(x == r))
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// setLag is changelog.Standby's lag report.
func (m *ownedMetrics) setLag(n uint64) { m.lag.Set(float64(n)) }

func (m *ownedMetrics) close() {
	m.stop()
	<-m.served
}
