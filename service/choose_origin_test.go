package service

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// Origin says where the names came from in the caller's words, and
// Explain adds it to a stream or durable not found only.
func TestChosenOriginAndExplain(t *testing.T) {
	t.Parallel()
	flags := Names{Program: "run", Settings: map[string]string{"Stream": "--stream", "Run": "'jetledger run'"}}
	for _, tt := range []struct {
		name  string
		c     Chosen
		names Names
		want  string
	}{
		{"given", Chosen{From: FromGiven}, flags, ""},
		{"recorded", Chosen{From: FromLedger}, flags, "as run recorded them in l.db"},
		{"defaults, not asked", Chosen{From: FromDefault}, flags, "the defaults: --stream not given"},
		{"defaults, other durables", Chosen{From: FromDefault, Durable: "d", Read: true, Recorded: 2}, flags,
			"the defaults: --stream not given, and no consumer run recorded in l.db has durable d"},
		{"defaults, nothing recorded", Chosen{From: FromDefault, Read: true}, flags,
			"the defaults: --stream not given, and l.db records no stream; 'jetledger run' records the one it consumes"},
		{"nothing recorded, a Go program's", Chosen{From: FromDefault, Read: true}, Names{},
			"the defaults: Stream not given, and l.db records no stream; the program records the one it consumes"},
	} {
		if got := tt.c.Origin("l.db", tt.names); got != tt.want {
			t.Errorf("%s: Origin = %q, want %q", tt.name, got, tt.want)
		}
	}
	c := Chosen{From: FromLedger}
	notFound := fmt.Errorf("look up: %w", jetstream.ErrStreamNotFound)
	if err := c.Explain(notFound, "l.db", flags); !errors.Is(err, jetstream.ErrStreamNotFound) || err.Error() != notFound.Error()+" (as run recorded them in l.db)" {
		t.Errorf("Explain = %v", err)
	}
	other := errors.New("other")
	if err := c.Explain(other, "l.db", flags); err != other { //nolint:errorlint // the same error
		t.Errorf("Explain of another error = %v", err)
	}
}
