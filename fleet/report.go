package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jetledger/jetledger/node"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ReportIntervalDefault is how often a Reporter sends a record while the
// link is up.
const ReportIntervalDefault = 15 * time.Second

// reportRetry is how soon a record the hub did not store is sent again.
const reportRetry = 5 * time.Second

// reportPoll is how often a Reporter looks at the link between records:
// a record goes up within this long of the link's return.
const reportPoll = time.Second

// Reporter sends an edge's Record to the hub's Bucket while the link is
// up: every Interval, at once when the link comes back, and again at the
// next look after one that was not stored. It runs beside processing and
// never in its way: Gather reads, the put waits at most a few seconds.
// Run and Send are not for concurrent use.
type Reporter struct {
	// Site is the edge's JetStream domain: the record's key, and the site
	// the record names, which List wants to be the same. Required:
	// letters, digits, '-' and '_', as a domain is (ErrInvalidSite).
	Site string
	// HubDomain is the hub's JetStream domain. Required.
	HubDomain string
	// Conn is a connection to the edge's own server. Required.
	Conn *nats.Conn
	// Link is the link's status (node.Node.Link). Required.
	Link func() node.LinkStatus
	// Gather makes the record, all but Site, At and Link.LinkStatus.
	// Required.
	Gather func(context.Context) Record
	// Interval between records while the link stays up. Default
	// ReportIntervalDefault.
	Interval time.Duration
	// Logger gets a line when records stop being stored and when they are
	// again. Default slog.Default().
	Logger *slog.Logger

	kv jetstream.KeyValue // the hub's bucket, once found
}

// Run reports until ctx ends, or until Send refuses Site
// (ErrInvalidSite), which it logs.
func (r *Reporter) Run(ctx context.Context) {
	log, every := cmp.Or(r.Logger, slog.Default()), cmp.Or(r.Interval, ReportIntervalDefault)
	t := time.NewTicker(reportPoll)
	defer t.Stop()
	var sent, retry time.Time // the last record stored; when to try again after one that was not
	failing := false
	for {
		l := r.Link()
		due := sent.IsZero() || time.Since(sent) >= every || l.Connected.After(sent)
		if l.Up && due && !time.Now().Before(retry) {
			err := r.Send(ctx)
			switch {
			case ctx.Err() != nil:
				return
			case errors.Is(err, ErrInvalidSite):
				log.ErrorContext(ctx, "the site's status cannot go to the hub", "bucket", Bucket, "site", r.Site, "err", err)
				return
			case err == nil:
				sent, retry = time.Now(), time.Time{}
				if failing {
					log.InfoContext(ctx, "the site's status is stored at the hub again", "bucket", Bucket, "site", r.Site)
				}
				failing = false
			default:
				// Again in reportRetry, not at the next look: each try reads
				// the ledger's counts.
				retry = time.Now().Add(reportRetry)
				if !failing {
					failing = true
					log.WarnContext(ctx, "the site's status could not be stored at the hub (is its bucket there? jetledger hub --domain <site> makes it); trying again",
						"bucket", Bucket, "site", r.Site, "err", err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Send gathers a record and puts it in the hub's bucket, waiting for the
// hub's acknowledgement a few seconds at most. A Site that is no
// JetStream domain is refused (ErrInvalidSite) before anything is gathered
// or sent: List would list its record as a mismatch.
func (r *Reporter) Send(ctx context.Context) error {
	if !validName.MatchString(r.Site) {
		return fmt.Errorf("%w: Site %q: want the edge's JetStream domain (letters, digits, '-' and '_'), the key its record goes under", ErrInvalidSite, r.Site)
	}
	rec := r.Gather(ctx)
	rec.Site, rec.At = r.Site, time.Now()
	rec.Link.LinkStatus = r.Link()
	data, err := rec.Marshal()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if r.kv == nil {
		// In the hub's domain: across a leaf link between domains $KV.> is
		// denied, and the hub maps its domain's prefix back onto it.
		js, err := jetstream.NewWithDomain(r.Conn, r.HubDomain)
		if err != nil {
			return err
		}
		if r.kv, err = js.KeyValue(ctx, Bucket); err != nil {
			return fmt.Errorf("fleet: the hub's bucket %s: %w", Bucket, err)
		}
	}
	_, err = r.kv.Put(ctx, r.Site, data)
	return err
}
