package consumer

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Ledger is what the consumer needs of the store.
type Ledger interface {
	ApplyBatch(ctx context.Context, batch []ledger.Delivery, h ledger.Handler, b ledger.Budget) ([]ledger.Result, error)
	RecordDeadLetters(ctx context.Context, dls []ledger.DeadLetter) error
	HasDeadLetter(ctx context.Context, stream string, seq uint64) (bool, error)
	HasProcessed(ctx context.Context, stream string, seq uint64, id string) (bool, error)
	ClassifyUnseen(ctx context.Context, d ledger.Delivery) (ledger.Outcome, error)
	AdoptSequenceIDs(ctx context.Context, stream, prefix string, created time.Time) (int64, error)
}

var _ Ledger = (*ledger.Store)(nil)

// JetStream is what the consumer needs of the JetStream client: consumer
// management, and the connection to flush acks before it returns.
type JetStream interface {
	jetstream.StreamConsumerManager
	Stream(ctx context.Context, stream string) (jetstream.Stream, error)
	Conn() *nats.Conn
}

// Defaults for Config fields left at zero.
const (
	DurableDefault     = "jetledger"
	MaxDeliverDefault  = 5
	BackoffBaseDefault = time.Second
	BackoffMaxDefault  = time.Minute
	FetchWaitDefault   = time.Second
)

// Config configures a Consumer.
type Config struct {
	// Stream is the stream to consume. Required.
	Stream string
	// Durable is the durable pull consumer's name. Default "jetledger".
	Durable string
	// FilterSubjects restricts a consumer this package creates. Default: all.
	FilterSubjects []string
	// Plan is the timing budget; AckWait of a created consumer is
	// Plan.AckWait(), and an existing consumer must satisfy Plan.Validate.
	Plan ackwait.Plan
	// Handler applies one message inside the batch transaction. Required.
	Handler ledger.Handler
	// MaxDeliver is how many deliveries a failing message gets before it is
	// dead-lettered. Default 5; -1 is unlimited. The consumer enforces it
	// itself and creates durables with no server-side limit; an existing
	// durable's own lower limit is honoured, with a warning.
	MaxDeliver int
	// BackoffBase is the nak delay after the first failed delivery; it
	// doubles per delivery up to BackoffMax. Defaults 1s and 1m.
	BackoffBase, BackoffMax time.Duration
	// FetchWait is how long an idle consumer's pull request waits for a
	// message; it bounds how long shutdown waits. Default 1s.
	FetchWait time.Duration
	// AllowSequenceIDs makes a message without Nats-Msg-Id use
	// "<stream>/<sequence>" as its id instead of being dead-lettered. Such
	// an id catches redeliveries but not a publisher's retried publish.
	AllowSequenceIDs bool
	// AfterCommit, if set, is called after each batch commits and before
	// its acks are sent.
	AfterCommit func(BatchReport)
	// AfterAcks, if set, is called once a batch's acks, naks and terms are
	// sent (or it was handed back), with how long that took and how long the
	// batch held its messages.
	AfterAcks func(AckReport)
	// Replay, if set, makes New create an ephemeral consumer that starts at
	// this position, instead of binding Durable.
	Replay *ReplayFrom
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// ReplayFrom is where a replay starts: a stream sequence, a time, or (both
// zero) the start of the stream; and where it ends.
type ReplayFrom struct {
	Seq  uint64
	Time time.Time
	// UpTo is the last stream sequence replayed; later messages are left to
	// the live consumer. 0: to the end of the stream.
	UpTo uint64
}

// BatchReport describes a committed batch.
type BatchReport struct {
	Deliveries []ledger.Delivery
	Results    []ledger.Result
	// Elapsed is the time from the start of the batch's transaction to its
	// commit, handlers included.
	Elapsed time.Duration
}

// AckReport describes the answers sent for one batch.
type AckReport struct {
	N       int           // acks, naks and terms sent
	Elapsed time.Duration // time to send them
	// Held is the longest a message of the batch was held since the server
	// last restarted its AckWait (its receipt, or an InProgress) until the
	// answer. It must stay below AckWait, or the server delivers the message
	// again meanwhile.
	Held time.Duration
	// Batch is the time from the batch's start (after its messages were
	// admitted) to the answers: the plan keeps it within Deadline +
	// CommitTimeout plus the ack's trip.
	Batch time.Duration
}

// Counts are running totals since the Consumer was made.
type Counts struct {
	Applied     uint64 `json:"applied"`
	Duplicates  uint64 `json:"duplicates"`
	Conflicts   uint64 `json:"conflicts"`
	Failed      uint64 `json:"failed"`
	Naks        uint64 `json:"naks"`
	Terms       uint64 `json:"terms"`
	DeadLetters uint64 `json:"dead_letters"`
	Stale       uint64 `json:"stale"` // left to redelivery: waited past AckWait in the buffer
	Batches     uint64 `json:"batches"`
	Advisories  uint64 `json:"advisories"` // max-deliveries advisories handled
	Beyond      uint64 `json:"beyond"`     // replay: messages past ReplayFrom.UpTo, left alone
}

type counters struct {
	applied, duplicates, conflicts, failed, naks, terms, deadLetters, stale, batches, advisories, beyond atomic.Uint64
}

// Consumer consumes one durable through the ledger.
type Consumer struct {
	cfg        Config
	plan       ackwait.Plan
	js         JetStream
	cons       jetstream.Consumer
	serverMax  int       // the durable's server-side MaxDeliver, 0 or -1 for none
	created    time.Time // the stream's creation time: part of sequence ids
	ledger     Ledger
	log        *slog.Logger
	maxDeliver int
	n          counters
	warnSeqIDs sync.Once
}

// New validates cfg, then binds to the durable consumer or creates it with
// the plan's AckWait. An existing consumer that does not satisfy the plan is
// refused with an error wrapping ackwait.ErrAckWaitTooShort (or another
// ackwait sentinel) that names the durations and the fix.
func New(ctx context.Context, js JetStream, l Ledger, cfg Config) (*Consumer, error) {
	if cfg.Stream == "" {
		return nil, fmt.Errorf("%w: Stream is required", ErrInvalidConfig)
	}
	if cfg.Handler == nil {
		return nil, fmt.Errorf("%w: Handler is required", ErrInvalidConfig)
	}
	if cfg.MaxDeliver < -1 || cfg.BackoffBase < 0 || cfg.BackoffMax < 0 || cfg.FetchWait < 0 {
		return nil, fmt.Errorf("%w: MaxDeliver must be -1 or more, durations not negative", ErrInvalidConfig)
	}
	if err := cfg.Plan.Check(); err != nil {
		return nil, err
	}
	cfg.Durable = cmp.Or(cfg.Durable, DurableDefault)
	cfg.MaxDeliver = cmp.Or(cfg.MaxDeliver, MaxDeliverDefault)
	cfg.BackoffBase = cmp.Or(cfg.BackoffBase, BackoffBaseDefault)
	cfg.BackoffMax = cmp.Or(cfg.BackoffMax, BackoffMaxDefault)
	cfg.FetchWait = cmp.Or(cfg.FetchWait, FetchWaitDefault)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Consumer{cfg: cfg, plan: cfg.Plan.WithDefaults(), js: js, ledger: l, log: cfg.Logger}
	cons, err := c.bind(ctx)
	if err != nil {
		return nil, err
	}
	c.cons = cons
	return c, nil
}

func (c *Consumer) bind(ctx context.Context) (jetstream.Consumer, error) {
	s, err := c.js.Stream(ctx, c.cfg.Stream)
	if err != nil {
		return nil, fmt.Errorf("consumer: look up stream %s: %w", c.cfg.Stream, err)
	}
	c.created = s.CachedInfo().Created
	if c.cfg.AllowSequenceIDs {
		// Ids of the form of earlier releases stay duplicates.
		prefix := strings.TrimSuffix(SequenceID(c.cfg.Stream, c.created, 0), "0")
		if n, err := c.ledger.AdoptSequenceIDs(ctx, c.cfg.Stream, prefix, c.created); err != nil {
			return nil, fmt.Errorf("consumer: %w", err)
		} else if n > 0 {
			c.log.InfoContext(ctx, "renamed sequence ids to the stream-instance form", "stream", c.cfg.Stream, "rows", n)
		}
	}
	if r := c.cfg.Replay; r != nil {
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
		c.maxDeliver = c.cfg.MaxDeliver
		cons, err := c.js.CreateConsumer(ctx, c.cfg.Stream, cfg)
		if err != nil {
			return nil, fmt.Errorf("consumer: replay consumer on %s: %w", c.cfg.Stream, err)
		}
		return cons, nil
	}
	cons, err := c.js.Consumer(ctx, c.cfg.Stream, c.cfg.Durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		cons, err = c.js.CreateConsumer(ctx, c.cfg.Stream, jetstream.ConsumerConfig{
			Durable:   c.cfg.Durable,
			AckPolicy: jetstream.AckExplicitPolicy,
			AckWait:   c.plan.AckWait(),
			// Unlimited on the server: jetledger enforces MaxDeliver itself.
			// A server-side limit drops a message silently when the process
			// holding its last delivery dies; ours dead-letters it when it
			// comes back.
			MaxDeliver:     -1,
			FilterSubjects: c.cfg.FilterSubjects,
			MaxAckPending:  max(1000, 4*c.plan.BatchSize),
			DeliverPolicy:  jetstream.DeliverAllPolicy,
		})
		if errors.Is(err, jetstream.ErrConsumerExists) { // another instance won the race
			cons, err = c.js.Consumer(ctx, c.cfg.Stream, c.cfg.Durable)
		}
		if err == nil {
			c.log.InfoContext(ctx, "created consumer", "stream", c.cfg.Stream, "durable", c.cfg.Durable, "ack_wait", c.plan.AckWait())
		}
	}
	if err != nil {
		return nil, fmt.Errorf("consumer: bind %s/%s: %w", c.cfg.Stream, c.cfg.Durable, err)
	}
	info := cons.CachedInfo()
	if info.Config.DeliverSubject != "" {
		return nil, fmt.Errorf("%w: %s/%s", ErrPushConsumer, c.cfg.Stream, c.cfg.Durable)
	}
	if err := c.plan.Validate(info.Config); err != nil {
		return nil, fmt.Errorf("consumer %s/%s: %w", c.cfg.Stream, c.cfg.Durable, err)
	}
	c.maxDeliver = c.cfg.MaxDeliver
	c.serverMax = info.Config.MaxDeliver
	if server := info.Config.MaxDeliver; server > 0 {
		if c.maxDeliver < 0 || server < c.maxDeliver {
			c.maxDeliver = server
		}
		c.log.WarnContext(ctx, "consumer has a server-side MaxDeliver: a message whose last delivery is lost to a crash is dropped by the server without a dead letter; recreate the consumer with MaxDeliver -1 and let jetledger enforce the limit",
			"stream", c.cfg.Stream, "durable", c.cfg.Durable, "max_deliver", server)
	}
	return cons, nil
}

// ReplayDone reports, for a replay, that every message up to its bound
// (or the end of the stream) has been handled: applied, found a duplicate or
// a conflict, or dead-lettered.
func (c *Consumer) ReplayDone(ctx context.Context) (bool, error) {
	info, err := c.cons.Info(ctx)
	if err != nil {
		return false, fmt.Errorf("consumer: replay progress: %w", err)
	}
	if info.NumAckPending > 0 {
		return false, nil
	}
	// Messages come in stream order: once one past the bound was seen, all
	// before it were delivered, and none of them waits for an ack.
	up := uint64(0)
	if c.cfg.Replay != nil {
		up = c.cfg.Replay.UpTo
	}
	return info.NumPending == 0 || (up > 0 && (info.AckFloor.Stream >= up || c.n.beyond.Load() > 0)), nil
}

// Info returns the server's view of the consumer: pending, redelivered,
// ack floor.
func (c *Consumer) Info(ctx context.Context) (*jetstream.ConsumerInfo, error) {
	return c.cons.Info(ctx)
}

// Counts returns the running totals.
func (c *Consumer) Counts() Counts {
	return Counts{
		Applied: c.n.applied.Load(), Duplicates: c.n.duplicates.Load(), Conflicts: c.n.conflicts.Load(),
		Failed: c.n.failed.Load(), Naks: c.n.naks.Load(), Terms: c.n.terms.Load(),
		DeadLetters: c.n.deadLetters.Load(), Stale: c.n.stale.Load(), Batches: c.n.batches.Load(),
		Advisories: c.n.advisories.Load(), Beyond: c.n.beyond.Load(),
	}
}

// Run consumes until ctx ends, then finishes and commits the batch in hand,
// sends its acks and returns nil. It returns an error when the ledger fails
// (nothing of that batch is acked) or the consumer is deleted.
//
// Fetching is pipelined: the next batch is fetched while the current one is
// applied, so the network round trip overlaps the commit. At most one
// fetched batch waits; its wait is what Plan.BufferWait budgets.
func (c *Consumer) Run(ctx context.Context) error {
	defer func() {
		// Acks are fire-and-forget; make sure the last ones leave the process.
		if err := c.js.Conn().FlushTimeout(5 * time.Second); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			c.log.Warn("flushing acks", "err", err)
		}
	}()
	if c.serverMax > 0 {
		// The server may give up on a message whose last delivery we never
		// saw (a crash); its advisory is the only trace, so record it.
		sub, err := c.js.Conn().Subscribe(fmt.Sprintf("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.%s.%s", c.cfg.Stream, c.cfg.Durable),
			func(m *nats.Msg) { c.onMaxDeliveries(ctx, m.Data) })
		if err != nil {
			return fmt.Errorf("consumer: subscribe to max-deliveries advisories: %w", err)
		}
		defer sub.Unsubscribe() //nolint:errcheck // the connection may be closing
	}
	fetchCtx, stopFetching := context.WithCancel(ctx)
	defer stopFetching()
	batches := make(chan fetched) // unbuffered: one batch in hand, one waiting
	fetcherDone := make(chan struct{})
	go func() {
		defer close(fetcherDone)
		defer close(batches)
		c.fetchLoop(fetchCtx, batches)
	}()
	defer func() {
		stopFetching()
		for range batches { // a batch fetched after the stop is left to redelivery
		}
		<-fetcherDone
	}()
	for f := range batches {
		if f.err != nil {
			return f.err
		}
		if err := c.process(ctx, f.msgs); err != nil {
			return err
		}
	}
	return nil
}

type fetched struct {
	msgs []received
	err  error // fatal: the consumer is gone
}

// fetchLoop fetches until ctx ends, handing each non-empty batch over.
// Transient fetch errors are logged and retried with a growing pause.
func (c *Consumer) fetchLoop(ctx context.Context, out chan<- fetched) {
	failures := 0
	for ctx.Err() == nil {
		msgs, err := c.fetch()
		if err != nil {
			if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) ||
				errors.Is(err, jetstream.ErrStreamNotFound) {
				select {
				case out <- fetched{err: fmt.Errorf("%w: %s/%s: %v", ErrConsumerGone, c.cfg.Stream, c.cfg.Durable, err)}:
				case <-ctx.Done():
				}
				return
			}
			failures++
			c.log.WarnContext(ctx, "fetch failed", "stream", c.cfg.Stream, "durable", c.cfg.Durable, "err", err)
			if !sleep(ctx, min(time.Duration(failures)*100*time.Millisecond, 5*time.Second)) {
				return
			}
			continue
		}
		failures = 0
		if len(msgs) == 0 {
			continue
		}
		// Hand the batch over even if ctx ended meanwhile: it was delivered
		// to us, and processing it now beats waiting for its AckWait.
		out <- fetched{msgs: msgs}
	}
}

type received struct {
	msg jetstream.Msg
	at  time.Time
}

// fetch takes what is available up to the batch size without waiting for a
// full batch; when nothing is, it waits up to FetchWait for the first message
// and returns it at once: the pipelined fetcher asks for more meanwhile, so
// light traffic is not held back for company.
func (c *Consumer) fetch() ([]received, error) {
	msgs, err := c.drain(c.cons.FetchNoWait(c.plan.BatchSize))
	if err != nil || len(msgs) > 0 {
		return msgs, err
	}
	return c.drain(c.cons.Fetch(1, jetstream.FetchMaxWait(c.cfg.FetchWait)))
}

func (c *Consumer) drain(b jetstream.MessageBatch, err error) ([]received, error) {
	if err != nil {
		return nil, err
	}
	var out []received
	for m := range b.Messages() {
		out = append(out, received{msg: m, at: time.Now()})
	}
	if err := b.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
		// Messages already received are still ours to process.
		if len(out) > 0 {
			c.log.Warn("fetch ended early", "err", err)
			return out, nil
		}
		return nil, err
	}
	return out, nil
}

type item struct {
	msg  jetstream.Msg
	meta *jetstream.MsgMetadata
	// since is when the server's AckWait for the message last restarted:
	// its receipt, or an InProgress before its batch began.
	since time.Time
}

func (c *Consumer) process(ctx context.Context, msgs []received) error {
	now := time.Now()
	work := make([]item, 0, len(msgs))
	deliveries := make([]ledger.Delivery, 0, len(msgs))
	var dead []deadLetter
	for _, r := range msgs {
		meta, err := r.msg.Metadata()
		if err != nil {
			// Not a JetStream delivery; nothing to ack against.
			c.log.ErrorContext(ctx, "message without JetStream metadata", "subject", r.msg.Subject(), "err", err)
			continue
		}
		if rp := c.cfg.Replay; rp != nil && rp.UpTo > 0 && meta.Sequence.Stream > rp.UpTo {
			// Past the replay's bound: the live consumer's to apply, with its
			// effects. Terminating it ends it for this replay consumer only.
			c.n.beyond.Add(1)
			_ = r.msg.Term()
			continue
		}
		since := r.at
		switch c.plan.Admit(now.Sub(r.at)) {
		case ackwait.Skip:
			c.n.stale.Add(1)
			c.log.WarnContext(ctx, "message waited past its AckWait budget; leaving it to redelivery",
				"stream_seq", meta.Sequence.Stream, "waited", now.Sub(r.at))
			continue
		case ackwait.Refresh:
			_ = r.msg.InProgress() // resets AckWait; if lost, the ledger still dedupes
			since = now
		}
		id, err := MessageID(r.msg.Headers(), meta.Stream, c.created, meta.Sequence.Stream, c.cfg.AllowSequenceIDs)
		if err != nil {
			dead = append(dead, deadLetter{item{r.msg, meta, since}, err.Error()})
			continue
		}
		if r.msg.Headers().Get(jetstream.MsgIDHeader) == "" {
			c.warnSeqIDs.Do(func() {
				c.log.WarnContext(ctx, "messages without Nats-Msg-Id get stream/sequence ids; publisher retries will not be caught",
					"stream", meta.Stream)
			})
		}
		work = append(work, item{r.msg, meta, since})
		deliveries = append(deliveries, ledger.Delivery{
			MessageID: id, Stream: meta.Stream, Sequence: meta.Sequence.Stream,
			Subject: r.msg.Subject(), Data: r.msg.Data(), Delivered: meta.NumDelivered,
		})
	}

	var results []ledger.Result
	var refreshed atomic.Int64 // unix nanoseconds of the last InProgress round
	if len(work) > 0 {
		// Until every answer is sent: dead letters wait for the writer too.
		stop := c.keepInProgress(work, &refreshed)
		defer stop()
		var err error
		began := time.Now()
		// The plan's budget: a stop signal does not cut a batch short, its
		// deadline does.
		results, err = c.ledger.ApplyBatch(context.WithoutCancel(ctx), deliveries, c.cfg.Handler,
			ledger.Budget{Work: c.plan.Deadline, Commit: c.plan.CommitTimeout()})
		elapsed := time.Since(began)
		if errors.Is(err, ledger.ErrBusy) {
			// The writer was not free within the batch deadline (another
			// process holds it, and may be paused): nothing was committed, so
			// hand the batch back for a later try instead of exiting.
			c.log.WarnContext(ctx, "ledger busy; batch handed back for redelivery", "messages", len(work), "err", err)
			ackStart := time.Now()
			for _, it := range work {
				_ = it.msg.NakWithDelay(c.cfg.BackoffBase) // lost: AckWait brings it back
			}
			c.n.naks.Add(uint64(len(work)))
			c.reportAcks(now, ackStart, work, &refreshed)
			return nil
		}
		if err != nil {
			// Nothing committed, nothing acked: AckWait brings the batch back
			// once the database is fixed.
			return fmt.Errorf("consumer: %w; nothing of this batch was acked", err)
		}
		c.n.batches.Add(1)
		faultPoint("after-commit")
		if c.cfg.AfterCommit != nil {
			c.cfg.AfterCommit(BatchReport{Deliveries: deliveries, Results: results, Elapsed: elapsed})
		}
	}

	var acks, naks []item
	var nakDelays []time.Duration
	var terms []deadLetter
	for i, res := range results {
		it := work[i]
		switch res.Outcome {
		case ledger.Applied:
			c.n.applied.Add(1)
			acks = append(acks, it)
		case ledger.Duplicate:
			c.n.duplicates.Add(1)
			acks = append(acks, it)
		case ledger.Conflict:
			c.n.conflicts.Add(1)
			c.log.WarnContext(ctx, "conflict: message id reused with a different payload; recorded, not applied",
				"msg_id", deliveries[i].MessageID, "stream_seq", it.meta.Sequence.Stream)
			terms = append(terms, deadLetter{it, res.Err.Error()})
		case ledger.Failed:
			c.n.failed.Add(1)
			var term *TermError
			var retry *RetryError
			switch {
			case errors.As(res.Err, &term):
				dead = append(dead, deadLetter{it, res.Err.Error()})
			case c.maxDeliver > 0 && it.meta.NumDelivered >= uint64(c.maxDeliver):
				dead = append(dead, deadLetter{it, fmt.Sprintf("failed on delivery %d of %d: %v", it.meta.NumDelivered, c.maxDeliver, res.Err)})
			case errors.As(res.Err, &retry):
				naks, nakDelays = append(naks, it), append(nakDelays, retry.Delay)
			default:
				naks, nakDelays = append(naks, it), append(nakDelays, c.backoff(it.meta.NumDelivered))
				c.log.WarnContext(ctx, "handler failed; will retry", "msg_id", deliveries[i].MessageID,
					"delivery", it.meta.NumDelivered, "err", res.Err)
			}
		}
	}
	// Committed messages are acked first: whatever happens to the dead
	// letters below, their commit stands.
	ackStart := time.Now()
	for _, it := range acks {
		if err := it.msg.Ack(); err != nil {
			c.log.WarnContext(ctx, "ack failed; the redelivery will be a no-op", "stream_seq", it.meta.Sequence.Stream, "err", err)
		}
	}
	if err := c.recordDead(ctx, dead); err != nil {
		if !errors.Is(err, ledger.ErrBusy) {
			return err
		}
		// Not recorded, so not terminated: they come back after AckWait
		// and are dead-lettered then.
		c.log.WarnContext(ctx, "ledger busy; dead letters left to redelivery", "messages", len(dead), "err", err)
		dead = nil
	}
	for i, it := range naks {
		c.n.naks.Add(1)
		if err := it.msg.NakWithDelay(nakDelays[i]); err != nil {
			c.log.WarnContext(ctx, "nak failed", "stream_seq", it.meta.Sequence.Stream, "err", err)
		}
	}
	for _, d := range append(terms, dead...) {
		c.n.terms.Add(1)
		if err := d.msg.TermWithReason(d.reason); err != nil {
			c.log.WarnContext(ctx, "term failed", "stream_seq", d.meta.Sequence.Stream, "err", err)
		}
	}
	answered := append(append([]item(nil), work...), itemsOf(dead)...)
	c.reportAcks(now, ackStart, answered, &refreshed)
	return nil
}

// reportAcks tells AfterAcks about the answers just sent for items.
func (c *Consumer) reportAcks(batchStart, ackStart time.Time, items []item, refreshed *atomic.Int64) {
	if c.cfg.AfterAcks == nil || len(items) == 0 {
		return
	}
	oldest := items[0].since
	for _, it := range items {
		if it.since.Before(oldest) {
			oldest = it.since
		}
	}
	if r := time.Unix(0, refreshed.Load()); r.After(oldest) {
		oldest = r // every item of the batch was refreshed then
	}
	c.cfg.AfterAcks(AckReport{N: len(items), Elapsed: time.Since(ackStart), Held: time.Since(oldest), Batch: time.Since(batchStart)})
}

func itemsOf(dls []deadLetter) []item {
	out := make([]item, len(dls))
	for i, d := range dls {
		out[i] = d.item
	}
	return out
}

type deadLetter struct {
	item
	reason string
}

// recordDead stores dead letters before their Term, so a message the server
// stops delivering is never lost without a record.
func (c *Consumer) recordDead(ctx context.Context, dead []deadLetter) error {
	if len(dead) == 0 {
		return nil
	}
	dls := make([]ledger.DeadLetter, len(dead))
	for i, d := range dead {
		dls[i] = ledger.DeadLetter{
			MessageID: d.msg.Headers().Get(jetstream.MsgIDHeader), Stream: d.meta.Stream,
			Sequence: d.meta.Sequence.Stream, Subject: d.msg.Subject(), Headers: d.msg.Headers(),
			Payload: d.msg.Data(), Reason: d.reason, Deliveries: d.meta.NumDelivered,
		}
		c.log.WarnContext(ctx, "dead letter", "msg_id", dls[i].MessageID, "stream_seq", dls[i].Sequence, "reason", d.reason)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.plan.CommitTimeout())
	defer cancel()
	if err := c.ledger.RecordDeadLetters(ctx, dls); err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	c.n.deadLetters.Add(uint64(len(dls)))
	return nil
}

// onMaxDeliveries records a dead letter for a message the server stopped
// delivering, unless the consumer dead-lettered it itself.
func (c *Consumer) onMaxDeliveries(ctx context.Context, data []byte) {
	defer c.n.advisories.Add(1)
	var adv struct {
		Stream     string `json:"stream"`
		StreamSeq  uint64 `json:"stream_seq"`
		Deliveries uint64 `json:"deliveries"`
	}
	if err := json.Unmarshal(data, &adv); err != nil || adv.StreamSeq == 0 {
		c.log.WarnContext(ctx, "unreadable max-deliveries advisory", "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if seen, err := c.ledger.HasDeadLetter(ctx, adv.Stream, adv.StreamSeq); err == nil && seen {
		return
	}
	dl := ledger.DeadLetter{Stream: adv.Stream, Sequence: adv.StreamSeq, Deliveries: adv.Deliveries,
		Reason: fmt.Sprintf("the server stopped delivering after %d deliveries (max-deliveries advisory); the last one never completed", adv.Deliveries)}
	if done := c.settledUnseen(ctx, &dl); done {
		return
	}
	if err := c.ledger.RecordDeadLetters(ctx, []ledger.DeadLetter{dl}); err != nil {
		c.log.ErrorContext(ctx, "cannot record dead letter from advisory", "stream_seq", adv.StreamSeq, "err", err)
		return
	}
	c.n.deadLetters.Add(1)
	c.log.WarnContext(ctx, "dead letter", "msg_id", dl.MessageID, "stream_seq", dl.Sequence, "reason", dl.Reason)
}

// settledUnseen reads the message the server gave up on into dl and tells
// whether the ledger already settles it: applied (its last delivery's ack
// was lost: an applied message is never a dead letter), or a conflict with
// an applied one (recorded as such). If the ledger cannot say, the dead
// letter is recorded: one too many beats a message dropped without a trace.
func (c *Consumer) settledUnseen(ctx context.Context, dl *ledger.DeadLetter) bool {
	s, err := c.js.Stream(ctx, dl.Stream)
	var m *jetstream.RawStreamMsg
	if err == nil {
		m, err = s.GetMsg(ctx, dl.Sequence)
	}
	if err != nil {
		// The message is gone: the ledger can only be asked by sequence.
		done, err := c.ledger.HasProcessed(ctx, dl.Stream, dl.Sequence, "")
		if err != nil {
			c.log.WarnContext(ctx, "cannot check the ledger for a max-deliveries advisory; recording the dead letter", "stream_seq", dl.Sequence, "err", err)
		}
		return done
	}
	dl.MessageID, dl.Subject, dl.Headers, dl.Payload = m.Header.Get(jetstream.MsgIDHeader), m.Subject, m.Header, m.Data
	id, err := MessageID(m.Header, dl.Stream, c.created, dl.Sequence, c.cfg.AllowSequenceIDs)
	if err != nil {
		return false // no usable id: a dead letter, as a delivery would be
	}
	outcome, err := c.ledger.ClassifyUnseen(ctx, ledger.Delivery{MessageID: id, Stream: dl.Stream, Sequence: dl.Sequence,
		Subject: m.Subject, Data: m.Data, Delivered: dl.Deliveries})
	switch {
	case err != nil:
		c.log.WarnContext(ctx, "cannot check the ledger for a max-deliveries advisory; recording the dead letter", "stream_seq", dl.Sequence, "err", err)
		return false
	case outcome == ledger.Conflict:
		c.n.conflicts.Add(1)
		c.log.WarnContext(ctx, "conflict: message id reused with a different payload; recorded, not applied",
			"msg_id", id, "stream_seq", dl.Sequence)
	}
	return outcome == ledger.Duplicate || outcome == ledger.Conflict
}

// backoff is the nak delay after the given delivery: base·2^(n-1), capped.
func (c *Consumer) backoff(delivered uint64) time.Duration {
	d := c.cfg.BackoffBase
	for i := uint64(1); i < delivered && d < c.cfg.BackoffMax; i++ {
		d *= 2
	}
	return min(d, c.cfg.BackoffMax)
}

// keepInProgress tells the server every InProgressInterval, for as long as
// the batch runs (its work and its commit), that it is still being worked
// on, so a batch that runs long is not redelivered meanwhile.
func (c *Consumer) keepInProgress(work []item, refreshed *atomic.Int64) (stop func()) {
	iv := c.plan.InProgressInterval()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(iv)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				at := time.Now()
				for _, it := range work {
					_ = it.msg.InProgress() // best effort; the ledger dedupes a redelivery
				}
				refreshed.Store(at.UnixNano())
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
