package bench

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	ok := Config{Messages: 1000, PerMsgMessages: 100, Batch: 1, Rates: []int{1}, FailEvery: 2, LatencyDuration: time.Second}
	tests := []struct {
		name    string
		change  func(*Config)
		wantErr error
	}{
		{name: "smallest", change: func(*Config) {}},
		{name: "too few messages", change: func(c *Config) { c.Messages = 999 }, wantErr: ErrConfig},
		{name: "per-msg above messages", change: func(c *Config) { c.PerMsgMessages = 1001 }, wantErr: ErrConfig},
		{name: "no latency run", change: func(c *Config) { c.LatencyDuration = 0 }, wantErr: ErrConfig},
		{name: "negative rss", change: func(c *Config) { c.RSSMessages = -1 }, wantErr: ErrConfig},
		{name: "no rate", change: func(c *Config) { c.Rates = nil }, wantErr: ErrConfig},
		{name: "zero rate", change: func(c *Config) { c.Rates = []int{1000, 0} }, wantErr: ErrConfig},
		{name: "fail every message", change: func(c *Config) { c.FailEvery = 1 }, wantErr: ErrConfig},
		{name: "negative payload", change: func(c *Config) { c.PayloadBytes = -1 }, wantErr: ErrConfig},
		{name: "payload over 64 KiB", change: func(c *Config) { c.PayloadBytes = 65537 }, wantErr: ErrConfig},
		{name: "payload of 64 KiB", change: func(c *Config) { c.PayloadBytes = 65536 }},
	}
	for _, tt := range tests {
		c := ok
		tt.change(&c)
		if err := c.Validate(); !errors.Is(err, tt.wantErr) {
			t.Errorf("%s: err %v, want %v", tt.name, err, tt.wantErr)
		}
	}
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	v := []float64{5, 1, 4, 2, 3}
	for _, tt := range []struct{ p, want float64 }{{0.5, 3}, {1, 5}, {0.01, 1}} {
		if got := percentile(v, tt.p); got != tt.want {
			t.Errorf("percentile(%v) = %v, want %v", tt.p, got, tt.want)
		}
	}
	if percentile(nil, 0.5) != 0 {
		t.Error("percentile of nothing is not 0")
	}
}

// A padded payload is valid JSON of exactly the size asked, with the
// account and amount the balance handler reads; one asked smaller than it
// comes is left as it is.
func TestPayloadIsPaddedToTheSizeAsked(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 1))
	small := payload(rng, 7, 0)
	for _, size := range []int{0, 10, len(small) + 9, len(small) + 10, 1024, 65536} {
		b := payload(rng, 7, size)
		var p struct {
			Account string `json:"account"`
			Amount  int    `json:"amount"`
		}
		if err := json.Unmarshal(b, &p); err != nil || p.Account == "" || p.Amount == 0 {
			t.Fatalf("size %d: %s: %v", size, b, err)
		}
		if size > len(small)+9 && len(b) != size {
			t.Errorf("size %d: got %d bytes", size, len(b))
		}
	}
}
