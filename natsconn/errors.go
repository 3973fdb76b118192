package natsconn

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidConfig is a Config that cannot work: a certificate without
	// its key, a JetStream domain together with an API prefix, a negative
	// duration. errors.Is matches it in Connect's and Options' errors
	// (a *FileError or *NKeyError is returned for a file instead).
	ErrInvalidConfig = errors.New("natsconn: invalid config")
	// ErrCertWithoutKey is Config.TLSCert without Config.TLSKey, or the
	// other way round; it wraps ErrInvalidConfig.
	ErrCertWithoutKey = fmt.Errorf("%w: TLSCert and TLSKey go together", ErrInvalidConfig)

	// ErrNoSuchContext is a context whose file does not exist: a
	// *ContextError, with Selected set when context.txt chose it.
	ErrNoSuchContext = errors.New("natsconn: no such context")
	// ErrNotContext is a name that is not a context's (nor a .json file),
	// a file that is not a context's JSON, or a field of the wrong type: a
	// *ContextError.
	ErrNotContext = errors.New("natsconn: not a nats CLI context")
	// ErrUnsupported is a context field that is set and that this package
	// cannot honour (nsc, user_jwt, socks_proxy, a Windows certificate
	// store, a field of a newer nats CLI), or a value that refers to a
	// secret kept elsewhere (op://, env://, ...): a *ContextError.
	ErrUnsupported = errors.New("natsconn: unsupported context setting")
	// ErrContextConflict is a context whose fields contradict each other
	// (a certificate without its key, a domain and an API prefix) or name
	// a file that is not there: a *ContextError.
	ErrContextConflict = errors.New("natsconn: unusable context setting")
	// ErrNoContextDir is a context named without a directory to find it
	// in (no Dir, no $XDG_CONFIG_HOME, no home directory): a *ContextError.
	ErrNoContextDir = errors.New("natsconn: no directory for the nats CLI's contexts")
)

// FileError is a file of the Config (Creds, NKey, TLSCA, TLSCert, TLSKey)
// that cannot be read: checked before dialing so that a typo names the
// setting rather than failing inside the handshake.
type FileError struct {
	Setting string // the Config field: "Creds", "NKey", "TLSCA", "TLSCert" or "TLSKey"
	Err     error  // os.Stat's error, naming the path
}

func (e *FileError) Error() string { return "natsconn: " + e.Setting + ": " + e.Err.Error() }
func (e *FileError) Unwrap() error { return e.Err }

// NKeyError is a Config.NKey file that holds no usable NKey seed.
type NKeyError struct {
	Path string
	Err  error // nats.go's error
}

func (e *NKeyError) Error() string { return "natsconn: NKey " + e.Path + ": " + e.Err.Error() }
func (e *NKeyError) Unwrap() error { return e.Err }

// ConnectError is a failure of Connect after the Config was accepted:
// dialing the server (Op "connect") or opening its JetStream API (Op
// "jetstream"). URL is the server list with passwords redacted.
type ConnectError struct {
	Op  string // "connect" or "jetstream"
	URL string // redacted (RedactURL)
	Err error
}

func (e *ConnectError) Error() string {
	return "natsconn: " + e.Op + " " + e.URL + ": " + e.Err.Error()
}
func (e *ConnectError) Unwrap() error { return e.Err }

// ContextError is a nats CLI context that cannot be used. errors.Is
// matches Kind (ErrNoSuchContext, ErrNotContext, ErrUnsupported,
// ErrContextConflict, ErrNoContextDir) and the cause; Detail is the
// message without the package's prefix, naming the context's file and
// field, as a command line shows it.
type ContextError struct {
	Kind     error
	Name     string // the context's name, as given
	Path     string // its file, when known
	Field    string // the JSON field at fault, if one is
	Selected string // the context.txt that chose Name, if one did
	Err      error  // the cause, if any
	detail   string
}

func (e *ContextError) Error() string   { return "natsconn: " + e.detail }
func (e *ContextError) Detail() string  { return e.detail }
func (e *ContextError) Unwrap() []error { return []error{e.Kind, e.Err} }

// ConfigError is a setting that Resolve or Check refuses before any I/O,
// said in the caller's words (Sources.Names, Check's names): a command
// line prints Reason as its usage error. errors.Is and errors.As reach the
// refusal it says: a *ContextError, a *FileError, a *NKeyError,
// ErrCertWithoutKey.
type ConfigError struct {
	Reason string
	Err    error
}

func (e *ConfigError) Error() string { return "natsconn: " + e.Reason }

// Refusal is Reason: what a command line prints as its usage error.
func (e *ConfigError) Refusal() string { return e.Reason }
func (e *ConfigError) Unwrap() error   { return e.Err }
