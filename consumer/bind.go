package consumer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer/jsretry"
	"github.com/nats-io/nats.go/jetstream"
)

// Metadata keys of the consumers this package creates (and of the streams
// the jetledger binary creates), so that `nats consumer info` tells a NATS
// user who made a consumer and why it is configured as it is. Keys that
// begin with "_nats." are the server's (its version and API level); these
// stay outside that prefix.
const (
	// MetadataCreatedBy is "jetledger" on every consumer this package
	// creates. A durable that carries it is jetledger's own: when the plan
	// grows past its AckWait, New raises the AckWait instead of refusing it.
	MetadataCreatedBy = "io.jetledger.created_by"
	// MetadataVersion is the version of the program that created it, when
	// the program gives one in Config.Metadata (the jetledger binary does).
	MetadataVersion = "io.jetledger.version"
	// MetadataPlan spells out the timing plan the AckWait was derived from.
	MetadataPlan = "io.jetledger.plan"
	// MetadataMaxDeliver says why the server-side MaxDeliver is unlimited.
	MetadataMaxDeliver = "io.jetledger.max_deliver"
)

// createdBy is the value of MetadataCreatedBy.
const createdBy = "jetledger"

// serverMetadataPrefix starts the metadata keys nats-server keeps for itself.
const serverMetadataPrefix = "_nats."

// maxDeliverMetadata is the value of MetadataMaxDeliver: the reason the
// server is given no limit (see durableConfig).
const maxDeliverMetadata = "unlimited on the server (-1): jetledger counts deliveries and dead-letters a message at its own limit, " +
	"so a message whose last delivery dies with its process is dead-lettered when the consumer comes back instead of being dropped by the server"

// MadeByJetledger reports whether a consumer was created by this package,
// by its metadata. Durables of releases before the metadata count as not.
func MadeByJetledger(cfg jetstream.ConsumerConfig) bool {
	return cfg.Metadata[MetadataCreatedBy] != ""
}

// PlanMetadata is the value of MetadataPlan for p: every part of the
// AckWait it derives.
func PlanMetadata(p ackwait.Plan) string {
	p = p.WithDefaults()
	return fmt.Sprintf("AckWait %s = buffer wait %s + deadline %s + commit %s (commit margin %s + batch %d x %s) + ack margin %s",
		p.AckWait(), p.BufferWait, p.Deadline, p.CommitTimeout(), p.CommitMargin, p.BatchSize, p.PerMessage, p.AckMargin)
}

// maxAckPending is what a consumer is created with: room for a few batches
// in flight (a batch commits while the next is fetched).
func maxAckPending(p ackwait.Plan) int {
	return max(1000, 4*p.WithDefaults().BatchSize)
}

// checkMetadata refuses metadata keys that are the server's.
func checkMetadata(md map[string]string) error {
	for k := range md {
		if strings.HasPrefix(k, serverMetadataPrefix) {
			return fmt.Errorf("%w: Metadata key %q: keys beginning with %q are the server's", ErrInvalidConfig, k, serverMetadataPrefix)
		}
	}
	return nil
}

// metadata is what a consumer this package creates carries: the caller's
// Config.Metadata, then the package's own keys, which win.
func (c *Consumer) metadata() map[string]string {
	md := maps.Clone(c.cfg.Metadata)
	if md == nil {
		md = map[string]string{}
	}
	md[MetadataCreatedBy] = createdBy
	md[MetadataPlan] = PlanMetadata(c.plan)
	md[MetadataMaxDeliver] = maxDeliverMetadata
	return md
}

// bind finds the stream and binds the durable consumer, creating it with
// the plan's AckWait if it is missing, raising the AckWait of one it created
// for a smaller plan, and refusing one the plan cannot trust; or, for a
// replay, creates a temporary consumer from the replay's start.
func (c *Consumer) bind(ctx context.Context) (jetstream.Consumer, error) {
	if err := checkMetadata(c.cfg.Metadata); err != nil {
		return nil, err
	}
	// Every call to the server below waits out a cluster that cannot answer
	// yet (a leader being elected): starting then must not be fatal.
	s, err := jsretry.Call(ctx, c.log, "look up stream "+c.cfg.Stream, func(ctx context.Context) (jetstream.Stream, error) {
		return c.js.Stream(ctx, c.cfg.Stream)
	})
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	c.created = s.CachedInfo().Created
	c.streamInstance = StreamInstance(c.cfg.Stream, c.created)
	if c.cfg.AllowSequenceIDs {
		if err := c.adoptSequenceIDs(ctx); err != nil {
			return nil, err
		}
	}
	c.maxDeliver = c.cfg.MaxDeliver
	if c.cfg.Replay != nil {
		return c.bindReplay(ctx)
	}
	// Retried whole: a creation or a raise whose answer was lost is found
	// done by the next try's lookup.
	cons, err := jsretry.Call(ctx, c.log, "bind "+c.cfg.Stream+"/"+c.cfg.Durable, c.bindDurable)
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	return cons, c.checkDurable(ctx, cons.CachedInfo().Config)
}

// adoptSequenceIDs renames ledger rows with sequence ids of the form of
// earlier releases, so those messages stay duplicates.
func (c *Consumer) adoptSequenceIDs(ctx context.Context) error {
	prefix := strings.TrimSuffix(SequenceID(c.cfg.Stream, c.created, 0), "0")
	n, err := c.ledger.AdoptSequenceIDs(ctx, c.cfg.Stream, prefix, c.created)
	if err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	if n > 0 {
		c.log.InfoContext(ctx, "renamed sequence ids to the stream-instance form", "stream", c.cfg.Stream, "rows", n)
	}
	return nil
}

func (c *Consumer) bindReplay(ctx context.Context) (jetstream.Consumer, error) {
	r := c.cfg.Replay
	cfg := jetstream.ConsumerConfig{
		Description: "jetledger replay of " + c.cfg.Stream + ": a temporary consumer, removed by the server a minute after it goes idle",
		AckPolicy:   jetstream.AckExplicitPolicy, AckWait: c.plan.AckWait(), MaxDeliver: -1,
		FilterSubjects: c.cfg.FilterSubjects, MaxAckPending: maxAckPending(c.plan),
		InactiveThreshold: time.Minute, // the server cleans up after a replay that died
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		Metadata:          c.metadata(),
	}
	switch {
	case r.Seq > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, r.Seq
	case !r.Time.IsZero():
		t := r.Time
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &t
	}
	// A try whose answer was lost leaves a consumer behind, which the
	// server removes after InactiveThreshold.
	cons, err := jsretry.Call(ctx, c.log, "create the replay consumer on "+c.cfg.Stream, func(ctx context.Context) (jetstream.Consumer, error) {
		return c.js.CreateConsumer(ctx, c.cfg.Stream, cfg)
	})
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	return cons, nil
}

func (c *Consumer) bindDurable(ctx context.Context) (jetstream.Consumer, error) {
	cons, err := c.js.Consumer(ctx, c.cfg.Stream, c.cfg.Durable)
	switch {
	case err == nil:
		return c.fitDurable(ctx, cons)
	case !errors.Is(err, jetstream.ErrConsumerNotFound):
		return nil, err
	}
	cons, err = c.js.CreateConsumer(ctx, c.cfg.Stream, jetstream.ConsumerConfig{
		Durable:     c.cfg.Durable,
		Description: "jetledger durable of " + c.cfg.Stream + ": exactly-once through a SQLite ledger; AckWait from its timing plan, MaxDeliver enforced by jetledger (metadata io.jetledger.*)",
		AckPolicy:   jetstream.AckExplicitPolicy,
		AckWait:     c.plan.AckWait(),
		// Unlimited on the server: jetledger enforces MaxDeliver itself. A
		// server-side limit drops a message silently when the process
		// holding its last delivery dies; ours dead-letters it when it
		// comes back.
		MaxDeliver:     -1,
		FilterSubjects: c.cfg.FilterSubjects,
		MaxAckPending:  maxAckPending(c.plan),
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		Metadata:       c.metadata(),
	})
	if errors.Is(err, jetstream.ErrConsumerExists) { // another instance won the race
		if cons, err = c.js.Consumer(ctx, c.cfg.Stream, c.cfg.Durable); err != nil {
			return nil, err
		}
		return c.fitDurable(ctx, cons)
	}
	if err == nil {
		c.log.InfoContext(ctx, "created consumer", "stream", c.cfg.Stream, "durable", c.cfg.Durable, "ack_wait", c.plan.AckWait())
	}
	return cons, err
}

// fitDurable raises the AckWait of a durable this package created, and its
// MaxAckPending when a batch no longer fits, once the plan has grown past
// them (a longer deadline, a larger batch): refusing the consumer jetledger
// made itself would only send its user to the nats CLI. Nothing else
// changes, and nothing is lowered: a longer AckWait costs only a later
// redelivery after a crash. A durable made by anyone else, or by a release
// without the metadata, is left to checkDurable, which refuses it with the
// fix.
func (c *Consumer) fitDurable(ctx context.Context, cons jetstream.Consumer) (jetstream.Consumer, error) {
	have := cons.CachedInfo().Config
	if !MadeByJetledger(have) || have.DeliverSubject != "" || have.AckPolicy != jetstream.AckExplicitPolicy {
		return cons, nil
	}
	want := have
	want.AckWait = max(have.AckWait, c.plan.AckWait())
	if have.MaxAckPending > 0 && have.MaxAckPending < c.plan.BatchSize {
		want.MaxAckPending = maxAckPending(c.plan)
	}
	if want.AckWait == have.AckWait && want.MaxAckPending == have.MaxAckPending {
		return cons, nil
	}
	// The server's own keys (its version, API level) are not ours to send.
	want.Metadata = maps.Clone(have.Metadata)
	maps.DeleteFunc(want.Metadata, func(k, _ string) bool { return strings.HasPrefix(k, serverMetadataPrefix) })
	want.Metadata[MetadataPlan] = PlanMetadata(c.plan)
	up, err := c.js.UpdateConsumer(ctx, c.cfg.Stream, want)
	switch {
	case err != nil && (ctx.Err() != nil || jsretry.Transient(err)):
		// Not a refusal: bind tries again, watchDurable at its next look.
		return nil, err
	case err != nil:
		// No right to edit consumers, say: checkDurable refuses it as it
		// refuses anyone's, with the fix for a person to apply.
		c.log.WarnContext(ctx, "could not raise the AckWait of the durable jetledger created", "stream", c.cfg.Stream,
			"durable", c.cfg.Durable, "ack_wait", have.AckWait, "ack_wait_needed", want.AckWait, "err", err)
		return cons, nil
	}
	if got := up.CachedInfo().Config; got.AckWait < want.AckWait || got.MaxAckPending < want.MaxAckPending {
		// nats-server answers the first update after the consumer's leader
		// took over (a restart, an election) with what it held then, before
		// this update: what it holds now is read again.
		if _, err := up.Info(ctx); err != nil {
			return nil, err
		}
	}
	c.log.InfoContext(ctx, "raised the durable's AckWait for the longer plan: jetledger created it",
		"stream", c.cfg.Stream, "durable", c.cfg.Durable, "ack_wait_from", have.AckWait, "ack_wait_to", want.AckWait,
		"max_ack_pending_from", have.MaxAckPending, "max_ack_pending_to", want.MaxAckPending, "plan", c.plan.String())
	return up, nil
}

// checkDurable refuses a durable the plan cannot trust, and honours (with a
// warning) a server-side MaxDeliver lower than ours.
func (c *Consumer) checkDurable(ctx context.Context, cfg jetstream.ConsumerConfig) error {
	if cfg.DeliverSubject != "" {
		return fmt.Errorf("%w: %s/%s", ErrPushConsumer, c.cfg.Stream, c.cfg.Durable)
	}
	if have := filtersOf(cfg); !slices.Equal(have, sortedCopy(c.cfg.FilterSubjects)) {
		return fmt.Errorf("%w: %s/%s filters %q, this consumer %q; use another durable, or delete this one if nothing else uses it",
			ErrFilterMismatch, c.cfg.Stream, c.cfg.Durable, have, sortedCopy(c.cfg.FilterSubjects))
	}
	if err := c.plan.Validate(DurableOf(cfg)); err != nil {
		return c.refusal(err)
	}
	c.serverMax = cfg.MaxDeliver
	if server := cfg.MaxDeliver; server > 0 {
		if c.maxDeliver < 0 || server < c.maxDeliver {
			c.maxDeliver = server
		}
		c.log.WarnContext(ctx, "consumer has a server-side MaxDeliver: a message whose last delivery is lost to a crash is dropped by the server without a dead letter; recreate the consumer with MaxDeliver -1 and let jetledger enforce the limit",
			"stream", c.cfg.Stream, "durable", c.cfg.Durable, "max_deliver", server)
	}
	return nil
}

// DurableOf reads what the timing plan checks off a JetStream consumer's
// configuration (ackwait.Plan.Validate).
func DurableOf(cfg jetstream.ConsumerConfig) ackwait.Durable {
	return ackwait.Durable{Name: cfg.Durable, ExplicitAck: cfg.AckPolicy == jetstream.AckExplicitPolicy,
		AckPolicy: cfg.AckPolicy.String(), AckWait: cfg.AckWait, BackOff: cfg.BackOff, MaxAckPending: cfg.MaxAckPending}
}

// durableCheckEvery is how often a running consumer reads its durable's
// configuration again: another run with a smaller plan, or a person, may
// have lowered the AckWait since it was bound.
var durableCheckEvery = 10 * time.Second

// watchDurable keeps the durable fit for the plan while the consumer runs:
// one jetledger created is raised again when found lowered; anyone else's
// is reported, since only a person may change it.
func (c *Consumer) watchDurable(ctx context.Context) {
	t := time.NewTicker(durableCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		info, err := c.cons.Info(ctx)
		if err != nil {
			continue // the fetch loop reports a server that is gone
		}
		if c.plan.Validate(DurableOf(info.Config)) == nil {
			continue
		}
		if MadeByJetledger(info.Config) {
			c.log.WarnContext(ctx, "the durable's AckWait or MaxAckPending was lowered below the plan while running (another run with a smaller plan?); raising it again",
				"stream", c.cfg.Stream, "durable", c.cfg.Durable, "ack_wait", info.Config.AckWait, "ack_wait_needed", c.plan.AckWait())
			if _, err := c.fitDurable(ctx, c.cons); err != nil && ctx.Err() == nil {
				c.log.WarnContext(ctx, "could not raise the durable again", "err", err)
			}
			continue
		}
		c.log.ErrorContext(ctx, "the durable no longer fits the plan: messages may be redelivered while a batch still runs; fix it as the error says",
			"stream", c.cfg.Stream, "durable", c.cfg.Durable, "err", c.plan.Validate(DurableOf(info.Config)))
	}
}

// filtersOf is a durable's subject filters, sorted: one or several.
func filtersOf(cfg jetstream.ConsumerConfig) []string {
	fs := sortedCopy(cfg.FilterSubjects)
	if cfg.FilterSubject != "" {
		fs = append(fs, cfg.FilterSubject)
		slices.Sort(fs)
	}
	return fs
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}
