package publisher

import (
	"cmp"
	"fmt"
	"log/slog"
	"time"

	"github.com/jetledger/jetledger/internal/say"
)

// Defaults for Config fields left at zero.
const (
	AttemptsDefault  = 5
	TimeoutDefault   = 5 * time.Second
	RetryWaitDefault = 250 * time.Millisecond
	WindowDefault    = 512
)

// Bounds of Attempts and Timeout: the retry horizon, which the stream's
// duplicate window must cover, stays a sum of sane durations.
const (
	MaxAttempts = 100
	MaxTimeout  = time.Hour
)

// Config configures a Publisher. The zero value is valid.
type Config struct {
	// Attempts is how many times a publish is tried, the first included,
	// on timeouts and no-responders. Every attempt carries the same id.
	// Default 5; at most MaxAttempts.
	Attempts int
	// Timeout bounds one attempt's wait for the stream's ack. Default 5s;
	// at most MaxTimeout.
	Timeout time.Duration
	// RetryWait is the pause before the second attempt; it doubles after
	// each further one. Default 250ms.
	RetryWait time.Duration
	// Window is how many asynchronous publishes PublishBatch keeps in
	// flight. Default 512.
	Window int
	// Logger receives retry warnings. Default slog.Default().
	Logger *slog.Logger
	// OnAck, if set, is called by PublishBatch and PublishSeq with each
	// ack as it is confirmed, in order: a caller that dies mid-batch still
	// knows which messages the stream has.
	OnAck func(Ack)
	// Explicit says the caller sets Attempts and Timeout itself, as a
	// command line whose flags have defaults does: a zero is refused, not
	// taken as the default. Default false.
	Explicit bool
	// Names say the fields in the caller's words in a refusal
	// (*ConfigError): a field's name ("Attempts") to the caller's
	// ("--attempts"). A field not in it is said as itself.
	Names map[string]string
}

// Validate refuses (*ConfigError) a field out of its range, naming it as
// Names says. New validates its Config.
func (c Config) Validate() error {
	name := func(path string) string { return say.Name(c.Names, path) }
	switch {
	case c.Attempts < 0 || c.Attempts > MaxAttempts || c.Explicit && c.Attempts == 0:
		return refuse(nil, "%s %d: want 1 to %d", name("Attempts"), c.Attempts, MaxAttempts)
	case c.Timeout < 0 || c.Timeout > MaxTimeout || c.Explicit && c.Timeout == 0:
		return refuse(nil, "%s %s: want more than 0 and at most %s", name("Timeout"), c.Timeout, MaxTimeout)
	case c.RetryWait < 0:
		return refuse(nil, "%s %s: must not be negative", name("RetryWait"), c.RetryWait)
	case c.Window < 0:
		return refuse(nil, "%s %d: must not be negative", name("Window"), c.Window)
	}
	return nil
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	c.Attempts = cmp.Or(c.Attempts, AttemptsDefault)
	c.Timeout = cmp.Or(c.Timeout, TimeoutDefault)
	c.RetryWait = cmp.Or(c.RetryWait, RetryWaitDefault)
	c.Window = cmp.Or(c.Window, WindowDefault)
	return c
}

// refuse is a *ConfigError of err (nil for none) with the reason given.
func refuse(err error, format string, a ...any) error {
	return &ConfigError{Reason: fmt.Sprintf(format, a...), Err: err}
}
