package consumer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/nats-io/nats.go/jetstream"
)

// bind finds the stream and binds the durable consumer, creating it with the
// plan's AckWait if it is missing and refusing one the plan cannot trust; or,
// for a replay, creates a temporary consumer from the replay's start.
func (c *Consumer) bind(ctx context.Context) (jetstream.Consumer, error) {
	s, err := c.js.Stream(ctx, c.cfg.Stream)
	if err != nil {
		return nil, fmt.Errorf("consumer: look up stream %s: %w", c.cfg.Stream, err)
	}
	c.created = s.CachedInfo().Created
	if c.cfg.AllowSequenceIDs {
		if err := c.adoptSequenceIDs(ctx); err != nil {
			return nil, err
		}
	}
	c.maxDeliver = c.cfg.MaxDeliver
	if c.cfg.Replay != nil {
		return c.bindReplay(ctx)
	}
	cons, err := c.bindDurable(ctx)
	if err != nil {
		return nil, fmt.Errorf("consumer: bind %s/%s: %w", c.cfg.Stream, c.cfg.Durable, err)
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
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: c.plan.AckWait(), MaxDeliver: -1,
		FilterSubjects: c.cfg.FilterSubjects, MaxAckPending: max(1000, 4*c.plan.BatchSize),
		InactiveThreshold: time.Minute, // the server cleans up after a replay that died
		DeliverPolicy:     jetstream.DeliverAllPolicy,
	}
	switch {
	case r.Seq > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, r.Seq
	case !r.Time.IsZero():
		t := r.Time
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &t
	}
	cons, err := c.js.CreateConsumer(ctx, c.cfg.Stream, cfg)
	if err != nil {
		return nil, fmt.Errorf("consumer: replay consumer on %s: %w", c.cfg.Stream, err)
	}
	return cons, nil
}

func (c *Consumer) bindDurable(ctx context.Context) (jetstream.Consumer, error) {
	cons, err := c.js.Consumer(ctx, c.cfg.Stream, c.cfg.Durable)
	if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return cons, err
	}
	cons, err = c.js.CreateConsumer(ctx, c.cfg.Stream, jetstream.ConsumerConfig{
		Durable:   c.cfg.Durable,
		AckPolicy: jetstream.AckExplicitPolicy,
		AckWait:   c.plan.AckWait(),
		// Unlimited on the server: jetledger enforces MaxDeliver itself. A
		// server-side limit drops a message silently when the process
		// holding its last delivery dies; ours dead-letters it when it
		// comes back.
		MaxDeliver:     -1,
		FilterSubjects: c.cfg.FilterSubjects,
		MaxAckPending:  max(1000, 4*c.plan.BatchSize),
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if errors.Is(err, jetstream.ErrConsumerExists) { // another instance won the race
		return c.js.Consumer(ctx, c.cfg.Stream, c.cfg.Durable)
	}
	if err == nil {
		c.log.InfoContext(ctx, "created consumer", "stream", c.cfg.Stream, "durable", c.cfg.Durable, "ack_wait", c.plan.AckWait())
	}
	return cons, err
}

// checkDurable refuses a durable the plan cannot trust, and honours (with a
// warning) a server-side MaxDeliver lower than ours.
func (c *Consumer) checkDurable(ctx context.Context, cfg jetstream.ConsumerConfig) error {
	if cfg.DeliverSubject != "" {
		return fmt.Errorf("%w: %s/%s", ErrPushConsumer, c.cfg.Stream, c.cfg.Durable)
	}
	if err := c.plan.Validate(DurableOf(cfg)); err != nil {
		return fmt.Errorf("consumer %s/%s: %w", c.cfg.Stream, c.cfg.Durable, err)
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
