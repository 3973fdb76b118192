package ackwait_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ackwait"
)

func TestAckWaitIsSumOfBudget(t *testing.T) {
	t.Parallel()
	p := ackwait.Plan{Deadline: 10 * time.Second, BatchSize: 100, BufferWait: time.Second,
		CommitMargin: 3 * time.Second, PerMessage: 10 * time.Millisecond, AckMargin: time.Second}
	if got, want := p.AckWait(), 16*time.Second; got != want {
		t.Fatalf("AckWait = %s, want %s", got, want)
	}
	if got := p.InProgressInterval(); got >= p.AckWait() || got <= 0 {
		t.Fatalf("InProgressInterval = %s", got)
	}
	if def := (ackwait.Plan{}).AckWait(); def <= ackwait.DeadlineDefault {
		t.Fatalf("default AckWait %s not above the default deadline", def)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	p := ackwait.Plan{Deadline: 5 * time.Second, BatchSize: 10}
	need := p.AckWait()
	ok := ackwait.Durable{Name: "d", ExplicitAck: true, AckPolicy: "AckExplicit", AckWait: need}
	tests := []struct {
		name    string
		mod     func(d *ackwait.Durable)
		wantErr error
	}{
		{name: "exact", mod: func(d *ackwait.Durable) {}},
		{name: "longer", mod: func(d *ackwait.Durable) { d.AckWait = time.Hour }},
		{name: "short", mod: func(d *ackwait.Durable) { d.AckWait = time.Second }, wantErr: ackwait.ErrAckWaitTooShort},
		{name: "short backoff", mod: func(d *ackwait.Durable) { d.BackOff = []time.Duration{need, time.Second} }, wantErr: ackwait.ErrAckWaitTooShort},
		{name: "ack none", mod: func(d *ackwait.Durable) { d.ExplicitAck, d.AckPolicy = false, "AckNone" }, wantErr: ackwait.ErrAckPolicy},
		{name: "max ack pending", mod: func(d *ackwait.Durable) { d.MaxAckPending = 5 }, wantErr: ackwait.ErrMaxAckPending},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := ok
			tt.mod(&d)
			if err := p.Validate(d); !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestTooShortErrorNamesBothDurations(t *testing.T) {
	t.Parallel()
	p := ackwait.Plan{Deadline: 5 * time.Second, BatchSize: 10}
	err := p.Validate(ackwait.Durable{ExplicitAck: true, AckWait: 1500 * time.Millisecond})
	var tse *ackwait.TooShortError
	if !errors.As(err, &tse) || tse.Have != 1500*time.Millisecond || tse.Need != p.AckWait() {
		t.Fatalf("err = %v", err)
	}
	// The library speaks of durations, never of a CLI's flags.
	if strings.Contains(err.Error(), "--") {
		t.Errorf("message %q names a flag", err)
	}
}

func TestAdmit(t *testing.T) {
	t.Parallel()
	p := ackwait.Plan{BufferWait: time.Second, Deadline: 10 * time.Second, AckMargin: time.Second}
	tests := []struct {
		age  time.Duration
		want ackwait.Admission
	}{
		{0, ackwait.Process},
		{time.Second, ackwait.Process},
		{2 * time.Second, ackwait.Refresh},
		{p.AckWait() - time.Second, ackwait.Skip},
		{time.Hour, ackwait.Skip},
	}
	for _, tt := range tests {
		if got := p.Admit(tt.age); got != tt.want {
			t.Errorf("Admit(%s) = %d, want %d", tt.age, got, tt.want)
		}
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	if err := (ackwait.Plan{Deadline: -1}).Check(); !errors.Is(err, ackwait.ErrInvalidPlan) {
		t.Fatalf("err = %v", err)
	}
	if err := (ackwait.Plan{BatchSize: 1_000_000}).Check(); !errors.Is(err, ackwait.ErrInvalidPlan) {
		t.Fatalf("err = %v", err)
	}
	// A deadline that would make AckWait overflow is refused, not summed.
	if err := (ackwait.Plan{Deadline: 2562047 * time.Hour}).Check(); !errors.Is(err, ackwait.ErrInvalidPlan) {
		t.Fatalf("huge deadline: err = %v", err)
	}
	if w := (ackwait.Plan{Deadline: ackwait.MaxDuration, BufferWait: ackwait.MaxDuration, CommitMargin: ackwait.MaxDuration,
		PerMessage: ackwait.MaxDuration, AckMargin: ackwait.MaxDuration, BatchSize: ackwait.MaxBatchSize}).AckWait(); w <= 0 {
		t.Fatalf("the largest valid plan's AckWait overflowed: %s", w)
	}
}

func TestValidateLease(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		lease, timeout time.Duration
		wantErr        error
	}{
		{name: "derived", lease: ackwait.ClaimLease(10*time.Second, 0), timeout: 10 * time.Second},
		{name: "equal", lease: 10 * time.Second, timeout: 10 * time.Second, wantErr: ackwait.ErrLeaseTooShort},
		{name: "shorter", lease: 5 * time.Second, timeout: 10 * time.Second, wantErr: ackwait.ErrLeaseTooShort},
		{name: "no timeout", lease: 5 * time.Second, timeout: 0, wantErr: ackwait.ErrInvalidPlan},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := ackwait.ValidateLease(tt.lease, tt.timeout); !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	b := ackwait.Backoff{Base: time.Second, Max: 10 * time.Second}
	tests := []struct {
		n    int
		want time.Duration
	}{{0, time.Second}, {1, time.Second}, {2, 2 * time.Second}, {4, 8 * time.Second}, {5, 10 * time.Second}, {1000, 10 * time.Second}}
	for _, tt := range tests {
		if got := b.Delay(tt.n); got != tt.want {
			t.Errorf("Delay(%d) = %s, want %s", tt.n, got, tt.want)
		}
	}
	if got := (ackwait.Backoff{Base: time.Hour}).Delay(200); got <= 0 {
		t.Fatalf("uncapped Delay(200) = %s: overflowed", got)
	}
}
