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

// Error.Say says each remedy in the caller's words.
func TestErrorSaysTheRemedy(t *testing.T) {
	t.Parallel()
	names := map[string]string{"JetStream": "--nats", "Consumer": "run"}
	for _, tt := range []struct {
		name  string
		err   *Error
		names map[string]string
		want  string
	}{
		{"none", &Error{}, names, ""},
		{"other server", &Error{Remedy: RemedyOtherServer}, names, "point --nats at the server run consumes from"},
		{"other server, a Go program's", &Error{Remedy: RemedyOtherServer}, nil, "point JetStream at the server Consumer consumes from"},
		{"by subject", &Error{Remedy: RemedyPublishBySubject, Stream: "PAY"}, names,
			"publish its payload with its Nats-Msg-Id into stream PAY, to the subject it was first published to, then discard it"},
		{"into origin", &Error{Remedy: RemedyPublishIntoOrigin}, names, "publish its payload with its Nats-Msg-Id into the stream it came from, then discard it"},
		{"hub link", &Error{Remedy: RemedyHubLink}, names, "try again once the link to the hub is up"},
	} {
		if got := tt.err.Say(tt.names); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}
