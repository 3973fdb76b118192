package stream

import (
	"errors"
	"fmt"
	"time"

	"github.com/jetledger/jetledger/internal/say"
)

var (
	// ErrNotFound: the stream does not exist, and the Config gives neither
	// subjects nor sources to create it with.
	ErrNotFound = errors.New("the stream does not exist and no subjects or sources are given to create it")
	// ErrNotTheInstance: the server's stream of the name a ledger served is
	// not the instance that was last consumed into it (another server's
	// stream of that name, or one deleted and made again since).
	ErrNotTheInstance = errors.New("the server's stream of that name is not the one this ledger served")
	// ErrNoFloor: the copy is missing, and the ledger has applied messages
	// of it but knows not where in its source they end (an earlier release
	// pruned it without recording that).
	ErrNoFloor = errors.New("the ledger does not know where in the hub's stream its pruned rows end")
	// ErrBelowFloor: an existing copy that jetledger did not create copies
	// its source from below where the ledger's pruned rows end.
	ErrBelowFloor = errors.New("the stream copies its source from below where the ledger's pruned rows end")
	// ErrNoJetStream: the server has no JetStream for this account.
	ErrNoJetStream = errors.New("the server has no JetStream for this account")
	// ErrSubjectTaken: the effects subject is captured by another stream
	// than Effects.Stream.
	ErrSubjectTaken = errors.New("the subject is captured by another stream")
	// ErrInvalidConfig: a Config, Sourced or Effects is refused before any
	// I/O.
	ErrInvalidConfig = errors.New("invalid stream config")
)

// SubjectTakenError is ErrSubjectTaken with the stream that captures the
// subject.
type SubjectTakenError struct {
	Subject string // the effects subject
	By      string // the stream that captures it
	Want    string // Effects.Stream
}

func (e *SubjectTakenError) Error() string {
	return "stream: ensure effects: " + ErrSubjectTaken.Error() + ": " + e.Subject + " is captured by stream " + e.By + ", not " + e.Want
}

// Is makes errors.Is(err, ErrSubjectTaken) hold.
func (e *SubjectTakenError) Is(target error) bool { return target == ErrSubjectTaken }

// NotTheInstanceError is ErrNotTheInstance with the two instances: the
// stream found and the one the ledger served.
type NotTheInstanceError struct {
	Stream  string    // the stream's name
	Created time.Time // the creation time of the stream found
	Served  string    // the served instance's creation time (InstanceCreated)
	// Names, when given, say the advice in the caller's words: "NATS" is
	// what names the server read, "Run" what consumes the stream and
	// records it (a command line: "--nats", "run"). Default: the Go API's.
	Names map[string]string
}

func (e *NotTheInstanceError) Error() string {
	advice := "read the server whose stream this ledger served, or record this stream as the one it serves (ledger.Store.RememberConsumer, as jetledger run does)"
	if len(e.Names) > 0 {
		run := say.Name(e.Names, "Run")
		advice = "point " + say.Name(e.Names, "NATS") + " at the server " + run + " consumes, or " + run + " on this stream first, which records it"
	}
	return fmt.Sprintf("%v: stream %s here was created %s, the one this ledger served %s (another server's stream of that name, or one made again since): %s",
		ErrNotTheInstance, e.Stream, e.Created.UTC().Format(time.RFC3339Nano), e.Served, advice)
}

// Is makes errors.Is(err, ErrNotTheInstance) hold.
func (e *NotTheInstanceError) Is(target error) bool { return target == ErrNotTheInstance }

// NoFloorError is ErrNoFloor with what the ledger holds of the missing
// copy: Sourced.Start must say where to copy its source from.
type NoFloorError struct {
	Stream string // the missing copy
	Rows   int64  // the ledger's rows of it
	Source string // its source as floors name it (name@domain)
	Hub    string // the source stream's name
	// Names are what the advice calls Sourced's settings: "Start" to the
	// caller's name for it ("--hub-start-seq"). Default: "Sourced.Start".
	Names map[string]string
}

func (e *NoFloorError) Error() string {
	return fmt.Sprintf("%v: stream %s is missing, and this ledger holds %d rows of it but no record of where in %s the rows it pruned end (an earlier jetledger pruned it without one); copied from its start, %s would apply those messages a second time: "+
		"give %s with %s's sequence of the first message this ledger has not applied (1 if it never pruned this stream), or bring the stream's store back",
		ErrNoFloor, e.Stream, e.Rows, e.Source, e.Stream, named(e.Names, "Start", "Sourced.Start"), e.Hub)
}

// Is makes errors.Is(err, ErrNoFloor) hold.
func (e *NoFloorError) Is(target error) bool { return target == ErrNoFloor }

// EffectsError is EnsureEffects failing on JetStream: finding the stream
// that captures Subject (Op "find"), or creating Stream (Op "create").
type EffectsError struct {
	Op      string // "find", "create" or "consumer" (the hub's, HubEffectsConsumer)
	Subject string // Effects.Subject
	Stream  string // Effects.Stream
	Err     error  // JetStream's error
	// Names are what the message calls Effects' settings: "Stream" and
	// "Subject" to the caller's names ("--effects-stream"). Given, the
	// message is the caller's own, without the package's name. Default:
	// the fields ("Effects.Stream"), after "stream: ensure effects: ".
	Names map[string]string
}

func (e *EffectsError) Error() string {
	prefix := "stream: ensure effects: "
	if len(e.Names) > 0 {
		prefix = ""
	}
	if e.Op == "consumer" {
		return fmt.Sprintf("%screate the consumer %s on %s %s: %v", prefix, HubEffectsConsumer, named(e.Names, "Stream", "Effects.Stream"), e.Stream, e.Err)
	}
	if e.Op == "create" {
		return fmt.Sprintf("%screate %s %s: %v", prefix, named(e.Names, "Stream", "Effects.Stream"), e.Stream, e.Err)
	}
	return fmt.Sprintf("%sfind the stream for %s %s: %v", prefix, named(e.Names, "Subject", "Effects.Subject"), e.Subject, e.Err)
}

func (e *EffectsError) Unwrap() error { return e.Err }

// named is what names calls the setting at path, or field.
func named(names map[string]string, path, field string) string {
	if n, ok := names[path]; ok {
		return n
	}
	return field
}
