package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// latency offers cfg.Rate messages/s for cfg.LatencyDuration to a
// group-commit consumer and returns each message's publish-to-commit
// latency in milliseconds.
func latency(ctx context.Context, cfg Config) ([]float64, error) {
	if _, err := cfg.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "LAT", Subjects: []string{"lat.pay"}, Storage: jetstream.FileStorage}); err != nil {
		return nil, err
	}
	st, h, err := openLedger(ctx, cfg, filepath.Join(cfg.Dir, "latency.db"))
	if err != nil {
		return nil, err
	}
	defer st.Close()
	total := int(float64(cfg.Rate) * cfg.LatencyDuration.Seconds())
	lat := make([]float64, 0, total)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	c, err := consumer.New(ctx, cfg.JS, st, consumer.Config{
		Stream: "LAT", Durable: "lat", Handler: h, Logger: quiet, Plan: ackwait.Plan{BatchSize: cfg.Batch},
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
	if err := offer(runCtx, cfg.JS, cfg.Rate, total); err != nil {
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
// start + i/rate, each carrying its publish time.
func offer(ctx context.Context, js jetstream.JetStream, rate, total int) error {
	start := time.Now()
	interval := time.Second / time.Duration(rate)
	for i := 0; i < total && ctx.Err() == nil; i++ {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d) // pacing the offered load, not synchronising
		}
		msg := &nats.Msg{Subject: "lat.pay", Header: nats.Header{},
			Data: []byte(fmt.Sprintf(`{"account":"acct-%d","amount":1,"ts":%d}`, i%100, time.Now().UnixNano()))}
		msg.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("lat-%09d", i))
		if _, err := js.PublishMsgAsync(msg); err != nil {
			return err
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
