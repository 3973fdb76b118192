package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/node"
	"github.com/nats-io/nats.go"
)

// The states /healthz reports per check. Anyone who can reach the port
// reads them, so they say what is wrong, not where: the error, with its
// paths, goes to the log when a check's state changes.
const (
	stateOK           = "ok"
	stateNotConnected = "not_connected" // nats: the client is reconnecting
	stateUnavailable  = "unavailable"   // consumer: its info could not be read
	stateReadOnly     = "read_only"     // the file or its directory cannot be written
	stateDiskFull     = "disk_full"     // less than 1 MiB free on the disk
	stateAtMaxSize    = "at_max_size"   // database: at --db-max-size
	stateWriteFailed  = "write_failed"  // store: the embedded server failed a write and keeps the failure until restarted
	stateFailed       = "failed"        // any other error
)

var knownStates = map[string]bool{stateOK: true, stateNotConnected: true, stateUnavailable: true, stateReadOnly: true,
	stateDiskFull: true, stateAtMaxSize: true, stateWriteFailed: true, stateFailed: true}

// healthRefresh is how long a round of checks answers /healthz: a prober
// asking often costs one round, not one per request (the database check
// reads the filesystem, the consumer's asks the server).
const healthRefresh = 2 * time.Second

// healthProbe is one check of /healthz: nil when healthy.
type healthProbe struct {
	name  string
	check func(context.Context) error
}

// healthReport is /healthz's body.
type healthReport struct {
	Healthy bool              `json:"healthy"`
	Checks  map[string]string `json:"checks"`
}

// health serves /healthz from the last round of its probes, run again
// when it is older than healthRefresh.
type health struct {
	probes []healthProbe
	log    *slog.Logger

	mu     sync.Mutex
	at     time.Time
	report healthReport
}

func newHealth(log *slog.Logger, probes ...healthProbe) *health {
	return &health{probes: probes, log: log}
}

func (h *health) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rep := h.current(r.Context())
	w.Header().Set("Content-Type", "application/json")
	if !rep.Healthy {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	json.NewEncoder(w).Encode(rep) //nolint:errcheck // client gone
}

// current returns the last report, after a new round of checks if it is
// stale; a state that changed is logged with its error.
func (h *health) current(ctx context.Context) healthReport {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.at.IsZero() && time.Since(h.at) < healthRefresh {
		return h.report
	}
	rep := healthReport{Healthy: true, Checks: make(map[string]string, len(h.probes))}
	for _, p := range h.probes {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		err := p.check(pctx)
		cancel()
		state := stateOf(err)
		rep.Checks[p.name] = state
		rep.Healthy = rep.Healthy && err == nil
		if was := h.report.Checks[p.name]; was != state && (was != "" || err != nil) {
			if err != nil {
				h.log.Warn("health check failing", "check", p.name, "state", state, "was", was, "err", err)
			} else {
				h.log.Info("health check ok again", "check", p.name, "was", was)
			}
		}
	}
	h.report, h.at = rep, time.Now()
	return rep
}

// stateOf is the state an error of a probe stands for.
func stateOf(err error) string {
	switch {
	case err == nil:
		return stateOK
	case errors.Is(err, node.ErrStoreFailed):
		return stateWriteFailed
	case errors.Is(err, errNotConnected):
		return stateNotConnected
	case errors.Is(err, errConsumerUnavailable):
		return stateUnavailable
	case errors.Is(err, ledger.ErrAtMaxSize):
		return stateAtMaxSize
	case errors.Is(err, ledger.ErrFull):
		return stateDiskFull
	case errors.Is(err, ledger.ErrReadOnly):
		return stateReadOnly
	}
	return stateFailed
}

var (
	errNotConnected        = errors.New("not connected to NATS")
	errConsumerUnavailable = errors.New("consumer info unavailable")
)

func natsProbe(nc *nats.Conn) healthProbe {
	return healthProbe{"nats", func(context.Context) error {
		if s := nc.Status(); s != nats.CONNECTED {
			return fmt.Errorf("%w: %s", errNotConnected, s)
		}
		return nil
	}}
}

// databaseProbe looks at what the next commit needs (ledger.CheckWritable)
// without taking the writer, so a long batch does not make run look dead.
func databaseProbe(st *ledger.Store) healthProbe {
	return healthProbe{"database", st.CheckWritable}
}

func consumerProbe(c *consumer.Consumer) healthProbe {
	return healthProbe{"consumer", func(ctx context.Context) error {
		if _, err := c.Info(ctx); err != nil {
			return fmt.Errorf("%w: %w", errConsumerUnavailable, err)
		}
		return nil
	}}
}

// storeProbe is the embedded server's store: a write it failed, then the
// disk under it.
func storeProbe(e *node.Node) healthProbe {
	return healthProbe{"store", func(context.Context) error {
		if err := e.Fault(); err != nil {
			return err
		}
		return ledger.CheckDisk(e.StoreDir())
	}}
}
