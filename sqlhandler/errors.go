package sqlhandler

import "errors"

var (
	// ErrInvalidConfig is an argument of New or Check that cannot work
	// (a nil store).
	ErrInvalidConfig = errors.New("sqlhandler: invalid config")
	// ErrSchema is a Config.Schema that failed on the ledger for the SQL's
	// own sake (not the ledger file's condition): a *CheckError.
	ErrSchema = errors.New("sqlhandler: schema failed")
	// ErrApplyInvalid is a Config.Apply that does not compile on the
	// ledger, runs a statement a handler may not run (BEGIN, a fixed
	// pragma, ...), or uses a parameter the handler does not bind: a
	// *CheckError, and for a parameter also an *UnboundParamError.
	ErrApplyInvalid = errors.New("sqlhandler: apply invalid")
	// ErrNotJSON is the dead-letter reason of a payload Apply reads (it
	// uses :data) that is not JSON, and that Apply failed on or would read
	// only in part: trying it again would fail again. Its text is the
	// reason the ledger records, kept as users and tests read it.
	ErrNotJSON = errors.New("payload is not valid JSON, and --apply reads it")
)

// CheckError is SQL of the Config that New or Check refuses: a user's
// mistake, not the ledger's condition (which New returns as the ledger's
// error, wrapped). errors.Is matches its Kind (ErrSchema or
// ErrApplyInvalid) and the cause; the message names the run flags
// (--schema, --apply), as the command line shows it.
type CheckError struct {
	Kind error // ErrSchema or ErrApplyInvalid
	Err  error // the cause: the ledger's error, or an *UnboundParamError
	msg  string
}

func (e *CheckError) Error() string   { return e.msg }
func (e *CheckError) Unwrap() []error { return []error{e.Kind, e.Err} }

// UnboundParamError is Apply using parameters the handler does not bind:
// SQLite accepts any parameter name at compile time, so without this check
// a typo fails every message at run time and dead-letters it. It comes
// wrapped in a *CheckError of Kind ErrApplyInvalid.
type UnboundParamError struct {
	Params []string // as written in Apply, e.g. ":dta", "?1"
}

// Closest returns the bound parameter p was probably meant to be, with p's
// prefix (":dta" gives ":data"), or "" if none is close or p is positional.
func (e *UnboundParamError) Closest(p string) string { return closestParam(p) }
