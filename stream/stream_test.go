package stream_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/stream"
	"github.com/nats-io/nats.go/jetstream"
)

// A Config, Sourced or Effects that the server would refuse, or that
// lacks what it needs, is refused before any I/O.
func TestConfigIsValidated(t *testing.T) {
	t.Parallel()
	_, js := consumertest.Connect(t, consumertest.RunServer(t))
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"no name", func() error {
			_, err := stream.Ensure(t.Context(), js, stream.Config{Subjects: []string{"a"}})
			return err
		}},
		{"max age under the window", func() error {
			_, err := stream.Ensure(t.Context(), js, stream.Config{Name: "S", Subjects: []string{"a"}, Duplicates: time.Minute, Limits: stream.Limits{MaxAge: time.Second}})
			return err
		}},
		{"six replicas", func() error {
			_, err := stream.Ensure(t.Context(), js, stream.Config{Name: "S", Subjects: []string{"a"}, Limits: stream.Limits{Replicas: 6}})
			return err
		}},
		{"sourced without ledger", func() error {
			_, err := stream.EnsureSourced(t.Context(), js, stream.Sourced{Stream: stream.Config{Name: "S"}, Hub: "H"})
			return err
		}},
		{"effects wildcard", func() error {
			return stream.EnsureEffects(t.Context(), js, stream.Effects{Stream: "E", Subject: "fx.>", Timeout: time.Second})
		}},
		{"effects without timeout", func() error { return stream.EnsureEffects(t.Context(), js, stream.Effects{Stream: "E", Subject: "fx"}) }},
	} {
		if err := tc.call(); !errors.Is(err, stream.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", tc.name, err)
		}
	}
	if _, err := js.Stream(t.Context(), "S"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("a refused config made stream S: %v", err)
	}
}

// EnsureEffects creates the effects stream with a window covering the
// outbox's retries, uses it as it is the next time, and refuses a subject
// another stream captures.
func TestEnsureEffectsCreatesOnce(t *testing.T) {
	t.Parallel()
	_, js := consumertest.Connect(t, consumertest.RunServer(t))
	e := stream.Effects{Stream: "FX", Subject: "fx.site1", Timeout: 5 * time.Second, Logger: quiet}
	for range 2 {
		if err := stream.EnsureEffects(t.Context(), js, e); err != nil {
			t.Fatal(err)
		}
	}
	s, err := js.Stream(t.Context(), "FX")
	if err != nil {
		t.Fatal(err)
	}
	if w := s.CachedInfo().Config.Duplicates; w != e.Window() || w < stream.EffectsWindowMin {
		t.Fatalf("duplicate window %s, want %s (at least %s)", w, e.Window(), stream.EffectsWindowMin)
	}
	e.Stream = "OTHER"
	var taken *stream.SubjectTakenError
	if err := stream.EnsureEffects(t.Context(), js, e); !errors.Is(err, stream.ErrSubjectTaken) || !errors.As(err, &taken) || taken.By != "FX" {
		t.Fatalf("EnsureEffects of a subject FX captures, for OTHER: %v; want ErrSubjectTaken by FX", err)
	}
}
