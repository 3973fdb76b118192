package requeue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/requeue"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// discards is a Ledger that counts the dead letters deleted.
type discards struct{ n int }

func (l *discards) RequeuedDeadLetterAs(context.Context, int64, *ledger.Audit) error {
	l.n++
	return nil
}

func (l *discards) CheckMayWrite(context.Context) error { return nil }

// Requeue refuses, before any I/O, a config out of range and a dead
// letter without a Nats-Msg-Id.
func TestRequeueRefusesBeforeIO(t *testing.T) {
	t.Parallel()
	d := ledger.DeadLetter{ID: 1, MessageID: "evt-1", Stream: "PAY", Sequence: 1, Subject: "pay.alice"}
	tests := []struct {
		name    string
		js      jetstream.JetStream
		l       requeue.Ledger
		d       ledger.DeadLetter
		cfg     requeue.Config
		wantErr error
	}{
		{"negative wait", nil, &discards{}, d, requeue.Config{Wait: -time.Second}, requeue.ErrInvalidConfig},
		{"no msg id", nil, &discards{}, ledger.DeadLetter{ID: 1, Stream: "PAY"}, requeue.Config{}, requeue.ErrNoMsgID},
		{"no JetStream", nil, &discards{}, d, requeue.Config{}, requeue.ErrInvalidConfig},
		{"no ledger", nil, nil, d, requeue.Config{}, requeue.ErrInvalidConfig},
	}
	for _, tc := range tests {
		if _, err := requeue.Requeue(t.Context(), tc.js, tc.l, tc.d, tc.cfg); !errors.Is(err, tc.wantErr) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.wantErr)
		}
	}
	if err := requeue.Check(ledger.DeadLetter{ID: 2}); !errors.Is(err, requeue.ErrNoMsgID) {
		t.Errorf("Check of a dead letter without id: %v, want ErrNoMsgID", err)
	}
}

// A server without the dead letter's stream, or whose stream of that name
// holds another message at its sequence, is refused as ErrWrongStream with
// RemedyOtherServer; nothing is stored and the dead letter is kept.
func TestRequeueRefusesAnotherInstance(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "PAY", Subjects: []string{"pay.*"}})
	if _, err := js.PublishMsg(t.Context(), &nats.Msg{Subject: "pay.alice", Header: nats.Header{jetstream.MsgIDHeader: {"twin-1"}}}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []ledger.DeadLetter{
		{ID: 1, MessageID: "evt-1", Stream: "NONE", Sequence: 1, Subject: "pay.alice"},
		{ID: 2, MessageID: "evt-1", Stream: "PAY", Sequence: 1, Subject: "pay.alice"},
		{ID: 3, MessageID: "evt-1", Stream: "PAY", Sequence: 7, Subject: "pay.alice"},
	} {
		l := &discards{}
		_, err := requeue.Requeue(t.Context(), js, l, d, requeue.Config{})
		var re *requeue.Error
		if !errors.Is(err, requeue.ErrWrongStream) || !errors.As(err, &re) || re.Remedy != requeue.RemedyOtherServer {
			t.Errorf("dead letter %d: %v, want ErrWrongStream with RemedyOtherServer", d.ID, err)
		}
		if l.n != 0 {
			t.Errorf("dead letter %d deleted after a refused requeue", d.ID)
		}
	}
	s, err := js.Stream(t.Context(), "PAY")
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CachedInfo().State.Msgs; n != 1 {
		t.Errorf("PAY holds %d messages, want only its own", n)
	}
}

// A Wait the caller cannot mean is a *ConfigError in its words; with
// Explicit a zero Wait is one too.
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	names := map[string]string{"Wait": "--wait"}
	for _, tt := range []struct {
		name string
		cfg  requeue.Config
		want string
	}{
		{"zero: the default", requeue.Config{}, ""},
		{"negative", requeue.Config{Wait: -time.Second, Names: names}, "--wait -1s: want a positive duration (how long to wait at an edge for the copy to be sourced from the hub)"},
		{"zero given", requeue.Config{Explicit: true}, "Wait 0s: want a positive duration (how long to wait at an edge for the copy to be sourced from the hub)"},
	} {
		err := tt.cfg.Validate()
		var ce *requeue.ConfigError
		if tt.want == "" && err != nil || tt.want != "" && (!errors.Is(err, requeue.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Refusal() != tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}
