package stream

import "errors"

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
