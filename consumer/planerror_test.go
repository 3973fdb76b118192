package consumer

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ackwait"
)

// A durable the plan refuses for a wait or MaxAckPending is a *PlanError
// saying the nats CLI command and the plan's settings as Names says, and
// still matches the plan's refusal; any other error is left as it is.
func TestPlanRefusal(t *testing.T) {
	t.Parallel()
	plan := ackwait.Plan{}.WithDefaults()
	flags := map[string]string{"Plan.Deadline": "--deadline", "Plan.BatchSize": "--batch", "Plan.BufferWait": "--buffer-wait",
		"Plan.CommitMargin": "--commit-margin", "Plan.AckMargin": "--ack-margin"}
	short := &ackwait.TooShortError{Field: "AckWait", Have: time.Second, Need: plan.AckWait(), Plan: plan}
	backoff := &ackwait.TooShortError{Field: "BackOff[1]", Have: time.Second, Need: plan.AckWait(), Plan: plan}
	pending := fmt.Errorf("x: %w", ackwait.ErrMaxAckPending)
	policy := fmt.Errorf("%w: consumer %q has ack policy none", ackwait.ErrAckPolicy, "d")
	need := plan.AckWait().String()
	tests := []struct {
		name    string
		err     error
		names   map[string]string
		want    string // "": err itself
		wantErr error
	}{
		{"ack wait", short, flags, "consumer EV/d: AckWait is 1s but the plan needs at least " + need + " (" + plan.String() + "); raise it: nats consumer edit EV d --wait " + need +
			"; or shrink the plan: lower --deadline or --batch (or --buffer-wait, --commit-margin, --ack-margin)", ackwait.ErrAckWaitTooShort},
		{"ack wait, fields", short, nil, "consumer EV/d: AckWait is 1s but the plan needs at least " + need + " (" + plan.String() + "); raise it: nats consumer edit EV d --wait " + need +
			"; or shrink the plan: lower Plan.Deadline or Plan.BatchSize (or Plan.BufferWait, Plan.CommitMargin, Plan.AckMargin)", ackwait.ErrAckWaitTooShort},
		{"backoff", backoff, flags, "consumer EV/d: BackOff[1] is 1s but the plan needs at least " + need + " (" + plan.String() + "), as every redelivery waits that long; " +
			"recreate the consumer with BackOff steps of " + need + " or more; or shrink the plan: lower --deadline or --batch (or --buffer-wait, --commit-margin, --ack-margin)", ackwait.ErrAckWaitTooShort},
		{"max ack pending", pending, flags, "consumer EV/d: its MaxAckPending is below --batch 100; raise it: nats consumer edit EV d --max-pending 100; or lower --batch", ackwait.ErrMaxAckPending},
		{"max ack pending, fields", pending, nil, "consumer EV/d: its MaxAckPending is below Plan.BatchSize 100; raise it: nats consumer edit EV d --max-pending 100; or lower Plan.BatchSize", ackwait.ErrMaxAckPending},
		{"ack policy", policy, flags, "", ackwait.ErrAckPolicy},
	}
	for _, tt := range tests {
		err := PlanRefusal("EV", "d", 100, tt.err, tt.names)
		if !errors.Is(err, tt.wantErr) {
			t.Errorf("%s: %v, want it to match %v", tt.name, err, tt.wantErr)
		}
		if tt.want == "" {
			if err != tt.err || errors.As(err, new(*PlanError)) {
				t.Errorf("%s: %v, want the error as it is", tt.name, err)
			}
			continue
		}
		if !errors.As(err, new(*PlanError)) || err.Error() != tt.want {
			t.Errorf("%s:\n got %q\nwant %q (a *PlanError)", tt.name, err, tt.want)
		}
	}
}
