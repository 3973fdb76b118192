package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// stageNames are the steps of a message of the latency run, each from the
// end of the one before: due (its place in the schedule) to the server's
// publish ack, to its receipt by the consumer, to the start of its batch's
// transaction, to the commit, to the commit on disk (where latency ends),
// to its ack sent.
var stageNames = [...]string{"publish ack", "received", "batch start", "commit", "on disk", "ack sent"}

// trace is when each message of the latency run passed each stage, in unix
// nanoseconds: trace[i][0] is message i's due time, trace[i][s+1] the end
// of stage s.
type trace [][len(stageNames) + 1]int64

// latency offers rate messages/s for cfg.LatencyDuration to a group-commit
// consumer on a stream of its own (the run's nth) and returns each
// message's publish-to-commit latency and where its time went.
func latency(ctx context.Context, cfg Config, nth, rate int) (Latency, error) {
	stream, subject := fmt.Sprintf("LAT%d", nth), fmt.Sprintf("lat%d.pay", nth)
	if _, err := cfg.JS.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject}, Storage: jetstream.FileStorage}); err != nil {
		return Latency{}, err
	}
	st, h, err := openLedger(ctx, cfg, cmp.Or(cfg.ledgerPath, filepath.Join(cfg.Dir, stream+".db")), nil)
	if err != nil {
		return Latency{}, err
	}
	defer st.Close()
	// As run does before its first batch, and before the clock: read in
	// the first batch, a pre-filled ledger's index (3 s at 10M ids) held
	// the first 3 000 messages, and the p99 said 3.7 s with or without a
	// prune.
	if err := st.WarmIndex(ctx); err != nil {
		return Latency{}, err
	}
	defer cfg.startAlongside(ctx, st)()
	total := max(1, int(float64(rate)*cfg.LatencyDuration.Seconds()))
	tr := make(trace, total)
	var mu sync.Mutex // AfterAcks also runs off the acker when the writer is busy
	var committed int
	var last []int // the messages of the batch last reported, for its acks
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	c, err := consumer.New(ctx, cfg.JS, st, consumer.Config{
		Stream: stream, Durable: "lat", Handler: h, Logger: quiet, Plan: ackwait.Plan{BatchSize: cfg.Batch},
		// A batch's AfterCommit, then its AfterAcks, on the acker goroutine.
		AfterCommit: func(r consumer.BatchReport) {
			mu.Lock()
			defer mu.Unlock()
			last = last[:0]
			for j, d := range r.Deliveries {
				i, err := strconv.Atoi(strings.TrimPrefix(d.MessageID, "lat-"))
				if err != nil || i < 0 || i >= total || tr[i][5] != 0 {
					continue // not ours, or a redelivery of one measured
				}
				t := &tr[i]
				t[2], t[3], t[4], t[5] = r.Received[j].UnixNano(), r.Started.UnixNano(), r.Committed.UnixNano(), r.Durable.UnixNano()
				last = append(last, i)
			}
			if committed += len(last); committed >= total {
				cancel()
			}
		},
		AfterAcks: func(consumer.AckReport) {
			mu.Lock()
			defer mu.Unlock()
			now := time.Now().UnixNano()
			for _, i := range last {
				tr[i][6] = now
			}
			last = last[:0]
		},
	})
	if err != nil {
		return Latency{}, err
	}
	runDone := make(chan error, 1)
	go func() { runDone <- c.Run(runCtx) }()
	if err := offer(runCtx, cfg.JS, subject, rate, tr); err != nil {
		cancel()
		<-runDone
		return Latency{}, err
	}
	select {
	case err := <-runDone:
		if err != nil {
			return Latency{}, err
		}
	case <-time.After(cfg.LatencyDuration + 30*time.Second):
		cancel()
		<-runDone
		return Latency{}, fmt.Errorf("latency run: %d of %d messages committed", committed, total)
	}
	return tr.summary(rate), nil
}

// offer publishes len(tr) messages on a fixed schedule, message i due at
// start + i/rate, and records each one's due time and publish ack in tr: a
// server that cannot take the load delays the publishes, and that delay is
// part of the latency measured (it is not left out because the publisher
// fell behind). It returns once every publish is acked.
func offer(ctx context.Context, js jetstream.JetStream, subject string, rate int, tr trace) error {
	acks := make(chan jetstream.PubAckFuture, 4096)
	var wg sync.WaitGroup
	var ackErr error
	wg.Go(func() {
		// Futures complete in order; each is stamped when it is seen done.
		// Not on ctx: the run ends once everything is committed, which can
		// be before the last acks are looked at.
		i := 0
		for f := range acks {
			select {
			case <-f.Ok():
				tr[i][1] = time.Now().UnixNano()
			case err := <-f.Err():
				ackErr = cmp.Or(ackErr, err)
			case <-time.After(publishAckTimeout):
				ackErr = cmp.Or(ackErr, fmt.Errorf("publish of message %d not acked within %s", i, publishAckTimeout))
			}
			i++
		}
	})
	err := schedule(ctx, js, subject, rate, tr, acks)
	close(acks)
	wg.Wait()
	return cmp.Or(err, ackErr)
}

// publishAckTimeout bounds the wait for one publish's ack in the latency run.
const publishAckTimeout = 30 * time.Second

// schedule publishes the messages of offer, handing each future to acks.
func schedule(ctx context.Context, js jetstream.JetStream, subject string, rate int, tr trace, acks chan<- jetstream.PubAckFuture) error {
	start := time.Now()
	interval := time.Second / time.Duration(rate)
	for i := range tr {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		due := start.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			time.Sleep(d) // pacing the offered load, not synchronising
		}
		tr[i][0] = due.UnixNano()
		msg := &nats.Msg{Subject: subject, Header: nats.Header{},
			Data: []byte(fmt.Sprintf(`{"account":"acct-%d","amount":1}`, i%100))}
		msg.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("lat-%09d", i))
		for {
			f, err := js.PublishMsgAsync(msg)
			if err == nil {
				acks <- f
				break
			}
			if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
				return err
			}
			// The server is behind: wait for it, then offer the same message.
			select {
			case <-js.PublishAsyncComplete():
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

// summary is the run's latency (due to on disk) and its stages.
func (tr trace) summary(rate int) Latency {
	const onDisk = 5 // the stage where latency ends
	total := make([]float64, 0, len(tr))
	for _, t := range tr {
		if t[onDisk] != 0 {
			total = append(total, ms(t[onDisk]-t[0]))
		}
	}
	l := Latency{Rate: rate, Messages: len(total), P50Ms: percentile(total, 0.50), P99Ms: percentile(total, 0.99),
		P999Ms: percentile(total, 0.999), MaxMs: percentile(total, 1)}
	// The slowest 1 % by latency, where their time went.
	cut := l.P99Ms
	for s, name := range stageNames {
		var v []float64
		var slowSum float64
		var slowN int
		for _, t := range tr {
			if t[onDisk] == 0 || t[s+1] == 0 || t[s] == 0 {
				continue
			}
			d := ms(t[s+1] - t[s])
			v = append(v, d)
			if ms(t[onDisk]-t[0]) >= cut {
				slowSum += d
				slowN++
			}
		}
		stage := Stage{Name: name, P50Ms: percentile(v, 0.50), P99Ms: percentile(v, 0.99), P999Ms: percentile(v, 0.999), MaxMs: percentile(v, 1)}
		if slowN > 0 {
			stage.SlowestMeanMs = slowSum / float64(slowN)
		}
		l.Stages = append(l.Stages, stage)
	}
	return l
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}
