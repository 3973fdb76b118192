package sqlhandler

import (
	"errors"
	"fmt"

	"github.com/jetledger/jetledger/ledger"
)

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
	// only in part: trying it again would fail again. The reason the
	// ledger records is its text, naming Config.Apply as Config.Names
	// says, and Apply's failure after a colon.
	ErrNotJSON = errors.New("payload is not valid JSON, and Config.Apply reads it")
)

// notJSONError is ErrNotJSON said with Apply's name (Config.Names),
// wrapping Apply's failure on the payload (nil for one with a NUL, which
// is not run).
type notJSONError struct {
	name string
	err  error
}

func (e *notJSONError) Error() string {
	s := "payload is not valid JSON, and " + e.name + " reads it"
	if e.err != nil {
		s += ": " + e.err.Error()
	}
	return s
}

func (e *notJSONError) Unwrap() []error {
	if e.err == nil {
		return []error{ErrNotJSON}
	}
	return []error{ErrNotJSON, e.err}
}

// name is what names (Config.Names) calls the Config setting at path:
// the caller's name, or the field ("Config.Apply").
func name(names map[string]string, path string) string {
	if n, ok := names[path]; ok {
		return n
	}
	return "Config." + path
}

// prefix is the package's name before a message naming the Config's
// fields; a message in the caller's words (names given) is the caller's
// own, printed as it is.
func prefix(names map[string]string) string {
	if len(names) > 0 {
		return ""
	}
	return "sqlhandler: "
}

// CheckError is SQL of the Config that New or Check refuses: a user's
// mistake, not the ledger's condition (a *ConditionError). errors.Is
// matches its Kind (ErrSchema or ErrApplyInvalid) and the cause; the
// message names Schema and Apply as Names says.
type CheckError struct {
	Kind  error             // ErrSchema or ErrApplyInvalid
	Name  string            // Config.SchemaName (ErrSchema only)
	Err   error             // the cause: the ledger's error, or an *UnboundParamError
	Names map[string]string // Config.Names; nil: the fields, after "sqlhandler: "
}

func (e *CheckError) Error() string {
	schema, apply := name(e.Names, "Schema"), name(e.Names, "Apply")
	var unbound *UnboundParamError
	var s string
	switch {
	case e.Kind == ErrSchema && errors.Is(e.Err, ledger.ErrFixedSetting):
		s = fmt.Sprintf("%s %s: %v; the ledger runs with synchronous=FULL in WAL mode, which its guarantee rests on: drop the pragma", schema, e.Name, e.Err)
	case e.Kind == ErrSchema:
		s = fmt.Sprintf("%s %s: %v", schema, e.Name, e.Err)
	case errors.As(e.Err, &unbound):
		s = unbound.say(apply)
	case errors.Is(e.Err, ledger.ErrTransactionControl), errors.Is(e.Err, ledger.ErrFixedSetting):
		s = fmt.Sprintf("%s: %v: the ledger owns the transaction and its settings; drop that statement", apply, e.Err)
	default:
		s = fmt.Sprintf("%s does not compile: %v (tables it uses must exist: create them with %s)", apply, e.Err, schema)
	}
	return prefix(e.Names) + s
}

func (e *CheckError) Unwrap() []error { return []error{e.Kind, e.Err} }

// ConditionError is Config SQL that New could not run (Schema) or check
// (Apply) for the ledger file's condition (ledger.ErrBusy, ErrFull,
// ErrReadOnly, ErrIO), not the SQL's: the SQL may be fine, and the same
// Config may work once the condition passes. errors.Is matches the cause;
// the message names the field as Names says.
type ConditionError struct {
	Field string            // "Schema" or "Apply": the Config field that was run
	Name  string            // Config.SchemaName (Field "Schema" only)
	Err   error             // the ledger's error
	Names map[string]string // Config.Names; nil: the fields, after "sqlhandler: "
}

func (e *ConditionError) Error() string {
	if e.Field == "Schema" {
		return fmt.Sprintf("%s%s %s could not run: %v (the ledger, not the SQL: another process may hold its writer)", prefix(e.Names), name(e.Names, "Schema"), e.Name, e.Err)
	}
	return fmt.Sprintf("%s%s could not be checked: %v (the ledger, not the SQL: another process may hold its writer)", prefix(e.Names), name(e.Names, "Apply"), e.Err)
}

func (e *ConditionError) Unwrap() error { return e.Err }

// UnboundParamError is Apply using parameters the handler does not bind:
// SQLite accepts any parameter name at compile time, so without this check
// a typo fails every message at run time and dead-letters it. It comes
// wrapped in a *CheckError of Kind ErrApplyInvalid.
type UnboundParamError struct {
	Params []string // as written in Apply, e.g. ":dta", "?1"
	Name   string   // what Config.Names calls Apply; "" says "Config.Apply"
}

// Closest returns the bound parameter p was probably meant to be, with p's
// prefix (":dta" gives ":data"), or "" if none is close or p is positional.
func (e *UnboundParamError) Closest(p string) string { return closestParam(p) }
