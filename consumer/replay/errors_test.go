package replay

import (
	"errors"
	"testing"
)

// The refusals are their sentinels, and Say says what fixes them in the
// caller's words.
func TestRefusalsSayTheCallersNames(t *testing.T) {
	t.Parallel()
	names := map[string]string{"Consumer": "run", "Durable": "--durable", "ToSeq": "--to-seq", "Sink": "--webhook", "Decided": "--no-effects"}
	for _, tt := range []struct {
		name string
		err  interface {
			error
			Say(map[string]string) string
		}
		names   map[string]string
		wantErr error
		want    string
	}{
		{"no durable", &NoDurableError{Stream: "S", Durable: "d"}, names, ErrNoDurable,
			`stream S has no durable "d", so replay cannot tell which messages run has yet to handle; name run's durable with --durable, or give --to-seq N: messages up to N then count as handled elsewhere and their effects are suppressed`},
		{"no durable, a Go program's", &NoDurableError{Stream: "S", Durable: "d"}, nil, ErrNoDurable,
			`stream S has no durable "d", so replay cannot tell which messages Consumer has yet to handle; name Consumer's durable with Durable, or give ToSeq N: messages up to N then count as handled elsewhere and their effects are suppressed`},
		{"past the floor", &UndecidedError{Floor: 3, UpTo: 5}, names, ErrEffectsUndecided,
			"the replay goes past run's ack floor (seq 3, up to 5): give it run's --webhook so their effects are recorded, or --no-effects if run has none"},
		{"a dead letter", &UndecidedError{Floor: 5, UpTo: 5, DeadLetter: 2, Sequence: 4}, names, ErrEffectsUndecided,
			"the replay reaches dead letter 2 (seq 4), which run never applied: give it run's --webhook so its effect is recorded, or --no-effects if run has none"},
	} {
		if got := tt.err.Say(tt.names); !errors.Is(tt.err, tt.wantErr) || got != tt.want {
			t.Errorf("%s: %q (is %v: %t), want %q", tt.name, got, tt.wantErr, errors.Is(tt.err, tt.wantErr), tt.want)
		}
	}
}
