package requeue

import (
	"errors"
	"testing"
	"time"

	"github.com/jetledger/jetledger/publisher"
)

// A copy not sourced in time is said with the caller's name for Wait.
func TestNotArrivedSaysWaitInTheCallersWords(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		names map[string]string
		want  string
	}{
		{"a Go program's", nil, "requeue dead letter 7 (id e-1): " + ErrNotArrived.Error() + ": HUB stored it as seq 3, but PAY has not sourced it within Wait 2s; it is kept: why"},
		{"a flag", map[string]string{"Wait": "--wait"}, "requeue dead letter 7 (id e-1): " + ErrNotArrived.Error() + ": HUB stored it as seq 3, but PAY has not sourced it within --wait 2s; it is kept: why"},
	} {
		var err error = &NotArrivedError{ID: 7, MessageID: "e-1", Via: publisher.Ack{Stream: "HUB", Sequence: 3}, Stream: "PAY", Wait: 2 * time.Second, Why: "why", Names: tt.names}
		if !errors.Is(err, ErrNotArrived) || err.Error() != tt.want {
			t.Errorf("%s: %q (ErrNotArrived %t), want %q", tt.name, err, errors.Is(err, ErrNotArrived), tt.want)
		}
	}
}
