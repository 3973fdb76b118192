package ackwait_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ackwait"
)

func TestParseDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    time.Duration
		wantErr error
	}{
		{in: "7d", want: 7 * 24 * time.Hour},
		{in: "30d", want: 30 * 24 * time.Hour},
		{in: "2w", want: 14 * 24 * time.Hour},
		{in: "1d12h", want: 36 * time.Hour},
		{in: "1w2d3h4m5s", want: (7+2)*24*time.Hour + 3*time.Hour + 4*time.Minute + 5*time.Second},
		{in: "1.5d", want: 36 * time.Hour},
		{in: "0.1d", want: 2*time.Hour + 24*time.Minute},
		{in: "-1d", want: -24 * time.Hour},
		{in: "90s", want: 90 * time.Second},
		{in: "1h30m", want: 90 * time.Minute},
		{in: "0", want: 0},
		{in: "250ms", want: 250 * time.Millisecond},
		{in: "", wantErr: ackwait.ErrInvalidDuration},
		{in: "d", wantErr: ackwait.ErrInvalidDuration},
		{in: "7", wantErr: ackwait.ErrInvalidDuration},
		{in: "7x", wantErr: ackwait.ErrInvalidDuration},
		{in: "7dd", wantErr: ackwait.ErrInvalidDuration},
		{in: "1d2", wantErr: ackwait.ErrInvalidDuration},
		{in: "-", wantErr: ackwait.ErrInvalidDuration},
		{in: "1.2.3d", wantErr: ackwait.ErrInvalidDuration},
		{in: "999999999w", wantErr: ackwait.ErrInvalidDuration},
		{in: "100000w100000w", wantErr: ackwait.ErrInvalidDuration},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ackwait.ParseDuration(tt.in)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("ParseDuration(%q) error %v, want %v", tt.in, err, tt.wantErr)
			}
			if err == nil && got != tt.want {
				t.Fatalf("ParseDuration(%q) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}
