package replay

import (
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/internal/say"
)

// Start is where a replay starts and what its caller says of the durable
// consumer's effects, as a caller (a command line's flags) gives them;
// From checks them together and reads Since.
type Start struct {
	// FromSeq is the stream sequence to replay from. Default 0: the
	// stream's start, unless Since.
	FromSeq uint64
	// Since replays messages stored since this long ago ("24h", "7d": see
	// ackwait.ParseDuration) or since this RFC 3339 time. Default "": none.
	// Not with FromSeq.
	Since string
	// ToSeq is the end the caller gives (ReadBounds); FromSeq must not be
	// past it. Default 0: none.
	ToSeq uint64
	// HaveSink says the caller gives the durable consumer's sink for
	// effects. Default false.
	HaveSink bool
	// NoEffects says the durable consumer has no effects. Not with
	// HaveSink. Default false.
	NoEffects bool
	// Names say the fields, and "Consumer" (the program that runs the
	// durable's consumer), in the caller's words in a refusal
	// (*ConfigError). A name not in it is said as itself.
	Names map[string]string
}

// From is where the replay starts, a duration in Since counted back from
// now. A refusal (the fields contradict each other, or Since is neither a
// positive duration nor an RFC 3339 time) is a *ConfigError in Names'
// words.
func (s Start) From(now time.Time) (consumer.ReplayFrom, error) {
	name := func(path string) string { return say.Name(s.Names, path) }
	switch {
	case s.FromSeq > 0 && s.Since != "":
		return consumer.ReplayFrom{}, refuse("give %s or %s, not both", name("FromSeq"), name("Since"))
	case s.NoEffects && s.HaveSink:
		return consumer.ReplayFrom{}, refuse("give %s or %s, not both: %s says %s has no effects",
			name("HaveSink"), name("NoEffects"), name("NoEffects"), name("Consumer"))
	case s.ToSeq > 0 && s.FromSeq > s.ToSeq:
		return consumer.ReplayFrom{}, refuse("%s %d is past %s %d", name("FromSeq"), s.FromSeq, name("ToSeq"), s.ToSeq)
	case s.Since == "":
		return consumer.ReplayFrom{Seq: s.FromSeq}, nil
	}
	if d, err := ackwait.ParseDuration(s.Since); err == nil {
		if d <= 0 {
			return consumer.ReplayFrom{}, refuse("%s %q: want a positive duration", name("Since"), s.Since)
		}
		return consumer.ReplayFrom{Time: now.Add(-d)}, nil
	}
	t, err := time.Parse(time.RFC3339, s.Since)
	if err != nil {
		return consumer.ReplayFrom{}, refuse("%s %q: want a duration (24h) or an RFC 3339 time (2026-11-30T00:00:00Z)", name("Since"), s.Since)
	}
	return consumer.ReplayFrom{Time: t}, nil
}

// Decided is whether the durable consumer's effects are known: its sink
// is given, or it has none (CheckEffects' decided).
func (s Start) Decided() bool { return s.HaveSink || s.NoEffects }
