package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// latency offers rate messages/s for cfg.LatencyDuration to a group-commit
// consumer on a stream of its own (the run's nth) and returns each
// message's publish-to-commit latency in milliseconds.
func latency(ctx context.Context, cfg Config, nth, rate int) ([]float64, error) {
	stream, subject := fmt.Sprintf("LAT%d", nth), fmt.Sprintf("lat%d.pay", nth)
	if _, err := cfg.JS.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject}, Storage: jetstream.FileStorage}); err != nil {
		return nil, err
	}
	st, h, err := openLedger(ctx, cfg, filepath.Join(cfg.Dir, stream+".db"))
	if err != nil {
		return nil, err
	}
	defer st.Close()
	total := max(1, int(float64(rate)*cfg.LatencyDuration.Seconds()))
	lat := make([]float64, 0, total)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	c, err := consumer.New(ctx, cfg.JS, st, consumer.Config{
		Stream: stream, Durable: "lat", Handler: h, Logger: quiet, Plan: ackwait.Plan{BatchSize: cfg.Batch},
		AfterCommit: func(r consumer.BatchReport) {
			now := time.Now()
			for _, d := range r.Deliveries {
				var p struct {
					TS int64 `json:"ts"`
				}
				if json.Unmarshal(d.Data, &p) == nil {
					lat = append(lat, float64(now.UnixNano()-p.TS)/1e6)
				}
			}
			if len(lat) >= total {
				cancel()
			}
		},
	})
	if err != nil {
		return nil, err
	}
	runDone := make(chan error, 1)
	go func() { runDone <- c.Run(runCtx) }()
	if err := offer(runCtx, cfg.JS, subject, rate, total); err != nil {
		cancel()
		<-runDone
		return nil, err
	}
	select {
	case err := <-runDone:
		if err != nil {
			return nil, err
		}
	case <-time.After(cfg.LatencyDuration + 30*time.Second):
		cancel()
		<-runDone
		return nil, fmt.Errorf("latency run: %d of %d messages committed", len(lat), total)
	}
	return lat, nil
}

// offer publishes total messages on a fixed schedule, message i due at
// start + i/rate, each carrying its due time: a server that cannot take the
// load delays the publishes, and that delay is part of the latency measured
// (it is not left out because the publisher fell behind).
func offer(ctx context.Context, js jetstream.JetStream, subject string, rate, total int) error {
	start := time.Now()
	interval := time.Second / time.Duration(rate)
	for i := 0; i < total && ctx.Err() == nil; i++ {
		due := start.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			time.Sleep(d) // pacing the offered load, not synchronising
		}
		msg := &nats.Msg{Subject: subject, Header: nats.Header{},
			Data: []byte(fmt.Sprintf(`{"account":"acct-%d","amount":1,"ts":%d}`, i%100, due.UnixNano()))}
		msg.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("lat-%09d", i))
		for {
			_, err := js.PublishMsgAsync(msg)
			if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
				if err != nil {
					return err
				}
				break
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

func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}
