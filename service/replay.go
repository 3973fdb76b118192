package service

import (
	"context"
	"fmt"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/replay"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/stream"
)

// ReplayTimeoutDefault bounds a replay's calls to the server as it starts:
// a one-shot replay gives up where Run waits.
const ReplayTimeoutDefault = 30 * time.Second

// Replay is a replay of the stream through the ledger (Service.Replay),
// up to where the durable stands, with each effect decided by
// replay.Effects.
type Replay struct {
	// From is where the replay starts. Default: the stream's start.
	From consumer.ReplayFrom
	// ToSeq moves the end (replay.ReadBounds). Default 0: the last message
	// the durable was delivered.
	ToSeq uint64
	// SendAll queues every effect for the run to send. Default: suppressed
	// up to the durable's ack floor.
	SendAll bool
	// EffectsDecided says the run's effects are known: Config.Sink is the
	// run's, or the run has none. Without it a replay past the ack floor
	// or reaching a dead letter is refused (*replay.UndecidedError).
	EffectsDecided bool
	// Progress, if set, is called about every 200ms with the messages
	// handled so far, and once more with finished set.
	Progress func(handled int64, finished bool)
	// Timeout bounds each call to the server as the replay starts. Default
	// ReplayTimeoutDefault.
	Timeout time.Duration
}

// ReplayResult is what a replay did.
type ReplayResult struct {
	Applied     uint64  `json:"applied"`
	Duplicates  uint64  `json:"duplicates"`
	Conflicts   uint64  `json:"conflicts"`
	Suppressed  int64   `json:"suppressed"`
	Queued      int64   `json:"queued"` // effects left for run to send: of messages run never handled, or with SendAll
	Review      int64   `json:"review"` // effects of messages run was delivered past its ack floor: a person checks the destination
	DeadLetters uint64  `json:"dead_letters"`
	UpTo        uint64  `json:"up_to"`
	Seconds     float64 `json:"seconds"`
	Empty       bool    `json:"-"` // nothing to replay: the durable was delivered nothing from From
}

// Replay replays the stream from r.From up to where the durable stands,
// through the ledger and the SQL handler as Run's, on a temporary consumer
// (the durable is not moved), and returns once every message up to the
// bound is handled. The stream must be the instance last consumed into
// the ledger (stream.ErrNotTheInstance).
func (s *Service) Replay(ctx context.Context, r Replay) (ReplayResult, error) {
	name, durable := s.cfg.Stream.Name, s.cfg.Consumer.Durable
	if err := stream.CheckServed(ctx, s.st, name, s.info.Created, s.cfg.servedNames(nil)); err != nil {
		return ReplayResult{}, err
	}
	s.log.InfoContext(ctx, "replaying", append([]any{"stream", name, "durable", durable, "db", s.cfg.DB}, s.cfg.StartAttrs...)...)
	setupCtx, cancel := context.WithTimeout(ctx, cmpOr(r.Timeout, ReplayTimeoutDefault))
	defer cancel()
	b, err := replay.ReadBounds(setupCtx, s.js, name, durable, r.ToSeq)
	if err != nil {
		return ReplayResult{}, step(StepBounds, err)
	}
	if b.UpTo == 0 || b.UpTo < r.From.Seq {
		res, err := s.replayResult(ctx, nil, time.Now(), b)
		res.Empty = true
		return res, err
	}
	if err := replay.CheckEffects(setupCtx, s.st, name, b, r.EffectsDecided); err != nil {
		return ReplayResult{}, err
	}
	from := r.From
	from.UpTo = b.UpTo
	s.fx.replay = &replay.Effects{Bounds: b, SendAll: r.SendAll}
	cfg := s.cfg.Consumer
	cfg.Replay = &from
	cons, err := consumer.New(setupCtx, s.js, s.st, cfg)
	if err != nil {
		return ReplayResult{}, err
	}
	started := time.Now()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	followed := make(chan struct{})
	go func() { defer close(followed); followReplay(runCtx, cons, r.Progress, stop) }()
	err = cons.Run(runCtx)
	stop()
	<-followed
	if err != nil {
		return ReplayResult{}, err
	}
	return s.replayResult(ctx, cons, started, b)
}

// followReplay tells progress how far the replay is and calls done once it
// has handled every message up to its bound.
func followReplay(ctx context.Context, c *consumer.Consumer, progress func(int64, bool), done func()) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		finished, err := c.ReplayDone(ctx)
		if err != nil {
			continue // a transient error: the next tick asks again
		}
		n := c.Counts()
		if progress != nil {
			progress(int64(n.Applied+n.Duplicates+n.Conflicts+n.DeadLetters), finished)
		}
		if finished {
			done()
			return
		}
	}
}

// replayResult counts what the replay did, its effects by the outbox rows
// made since it started.
func (s *Service) replayResult(ctx context.Context, c *consumer.Consumer, started time.Time, b replay.Bounds) (ReplayResult, error) {
	res := ReplayResult{UpTo: b.UpTo, Seconds: time.Since(started).Seconds()}
	if c != nil {
		n := c.Counts()
		res.Applied, res.Duplicates, res.Conflicts, res.DeadLetters = n.Applied, n.Duplicates, n.Conflicts, n.DeadLetters
	}
	var err error
	if res.Suppressed, err = s.st.CountOutbox(ctx, ledger.StatusSuppressed, started); err != nil {
		return res, err
	}
	if res.Queued, err = s.st.CountOutbox(ctx, ledger.StatusQueued, started); err != nil {
		return res, err
	}
	res.Review, err = s.st.CountOutbox(ctx, ledger.StatusReview, started)
	return res, err
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// RecordOnly is a sink by name alone, for Config.Sink of a replay: the
// replay records its rows, and the dispatcher of the run that has the
// sink sends them.
type RecordOnly string

func (r RecordOnly) Name() string { return string(r) }

// Send refuses: a replay sends nothing.
func (r RecordOnly) Send(context.Context, ledger.OutboxItem) (string, error) {
	return "", fmt.Errorf("%s: replay records effects and sends none", r)
}
func (RecordOnly) Idempotent() bool       { return false }
func (RecordOnly) Timeout() time.Duration { return time.Second }
