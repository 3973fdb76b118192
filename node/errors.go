package node

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
)

var (
	// ErrInvalidConfig is returned by Start for a Config it cannot use; the
	// error (a *ConfigError) names the field. It is found before any I/O.
	ErrInvalidConfig = errors.New("node: invalid configuration")

	// ErrUnauthenticated: a Listen that is not a loopback address with no
	// client authentication (Token, Publishers.Tokens, TLS.ClientCA) and
	// not Insecure. The error is a *ConfigError.
	ErrUnauthenticated = errors.New("node: a network address without client authentication")

	// ErrStoreLocked is returned by Start when another process (or another
	// Node of this one) owns the store: two servers on one store lose
	// messages each acked as stored. The error is a *StoreInUseError.
	ErrStoreLocked = errors.New("node: the store is in use")

	// ErrListen is returned by Start when the client address cannot be
	// listened on (the port is taken, say). The error is a *ListenError.
	ErrListen = errors.New("node: cannot listen on the client address")

	// ErrStoreFailed is the fault of a server that failed to write its store
	// (a full disk, a read-only filesystem): it keeps failing every publish,
	// unacknowledged, until it is restarted, since nats-server remembers a
	// stream's first write error and turns JetStream off on a permission
	// error. Fault and Watch return it.
	ErrStoreFailed = errors.New("node: the embedded JetStream server cannot write its store")

	// ErrMemoryLimit is the error of a memory limit the process cannot live
	// within (below MemoryLimitMin).
	ErrMemoryLimit = errors.New("node: memory limit too low")

	// ErrHubURL: a hub URL is missing (a leaf setting is given without
	// one), does not parse or has no host. The error of a bad one is a
	// *HubURLError.
	ErrHubURL = errors.New("node: bad hub URL")

	// ErrDomain: the leaf's JetStream domain is missing, or not made of
	// letters, digits, '-' and '_' (what nats-server accepts).
	ErrDomain = errors.New("node: bad JetStream domain")

	// ErrHubDomainName: the hub's JetStream domain is not made of letters,
	// digits, '-' and '_'.
	ErrHubDomainName = errors.New("node: bad hub JetStream domain")

	// ErrSameDomain: the leaf's domain is the hub's; each site needs its own.
	ErrSameDomain = errors.New("node: the leaf's JetStream domain is the hub's")

	// ErrNoPEM: a leaf's CA file holds no PEM certificate.
	ErrNoPEM = errors.New("node: no PEM certificate in the file")

	// ErrLeafTLS: a leaf's TLS file is missing, or cannot be read or used.
	// The error is a *LeafFileError.
	ErrLeafTLS = errors.New("node: leaf TLS")

	// ErrTLSPair: a client certificate without its key, or a key without
	// its certificate.
	ErrTLSPair = errors.New("node: TLS certificate and key go together")
)

// StoreInUseError is the refusal of a store another owner holds. It is
// ErrStoreLocked for errors.Is.
type StoreInUseError struct {
	Dir string // the store, absolute
	PID int    // the owner's process, 0 when it had not written it yet
	URL string // the owner's server, when it had started
}

func (e *StoreInUseError) Error() string {
	owner := LockHolder(e.PID)
	if e.URL != "" {
		owner += ", serving " + e.URL
	}
	return fmt.Sprintf("node: store %s is in use by %s (lock %s)", e.Dir, owner, e.LockFile())
}

// LockFile is the file whose lock the owner holds.
func (e *StoreInUseError) LockFile() string { return filepath.Join(e.Dir, LockFile) }

// Is makes a StoreInUseError ErrStoreLocked.
func (e *StoreInUseError) Is(target error) bool { return target == ErrStoreLocked }

// PathInUseError is LockPath's refusal of a file another process holds
// the lock of. It is ErrStoreLocked for errors.Is.
type PathInUseError struct {
	Path string // the lock file
	PID  int    // the holder's process, 0 when it had not written it yet
}

func (e *PathInUseError) Error() string {
	return fmt.Sprintf("node: %s is locked by %s", e.Path, LockHolder(e.PID))
}

// LockHolder names a lock's holder by the pid it wrote, 0 when it had
// not written it yet.
func LockHolder(pid int) string {
	if pid > 0 {
		return "pid " + strconv.Itoa(pid)
	}
	return "another process"
}

// Is makes a PathInUseError ErrStoreLocked.
func (e *PathInUseError) Is(target error) bool { return target == ErrStoreLocked }

// ListenError is Start's refusal of a client address it cannot listen on.
// It is ErrListen for errors.Is, and unwraps to the network's error.
type ListenError struct {
	Addr string
	Err  error
}

func (e *ListenError) Error() string {
	return fmt.Sprintf("node: cannot listen on %s: %v", e.Addr, e.Err)
}

// Unwrap gives ErrListen and the network's error.
func (e *ListenError) Unwrap() []error { return []error{ErrListen, e.Err} }

// HubURLError is LeafConfig.Validate's refusal of URLs[Index] (inside a
// *ConfigError). It is
// ErrHubURL for errors.Is; its text hides the URL's password.
type HubURLError struct {
	Index    int
	redacted string
}

func (e *HubURLError) Error() string {
	return fmt.Sprintf("node: hub URL %q: want a URL such as nats-leaf://hub.example:7422", e.redacted)
}

// Is makes a HubURLError ErrHubURL.
func (e *HubURLError) Is(target error) bool { return target == ErrHubURL }

// LeafFileError is Start's refusal of a leaf's TLS file (inside a
// *ConfigError): File is the path
// of the CA (CA true) or of the certificate and key. It is ErrLeafTLS for
// errors.Is, and unwraps to the cause (ErrNoPEM, a read error, a bad pair).
type LeafFileError struct {
	File string
	CA   bool
	Err  error
}

func (e *LeafFileError) Error() string {
	return fmt.Sprintf("node: leaf TLS file %s: %v", e.File, e.Err)
}

// Unwrap gives ErrLeafTLS and the cause.
func (e *LeafFileError) Unwrap() []error { return []error{ErrLeafTLS, e.Err} }

// ConfigError is the refusal of a setting by Validate or Start: Reason
// says what is wrong, naming the settings as Config.Names and
// LeafConfig.Names say, so that a caller prints it as it is. Err is what
// it is, for errors.Is and errors.As: ErrInvalidConfig, ErrDomain, a
// *HubURLError, a *LeafFileError, the error of a stat.
type ConfigError struct {
	Reason string
	Err    error
}

func (e *ConfigError) Error() string { return "node: " + e.Reason }

// Refusal is Reason: what a command line prints as its usage error.
func (e *ConfigError) Refusal() string { return e.Reason }

// Unwrap gives what the refusal is.
func (e *ConfigError) Unwrap() error { return e.Err }

// refuse is a *ConfigError of sentinel.
func refuse(sentinel error, format string, a ...any) error {
	return &ConfigError{Reason: fmt.Sprintf(format, a...), Err: sentinel}
}
