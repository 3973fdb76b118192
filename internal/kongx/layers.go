package kongx

import (
	"os"

	"github.com/alecthomas/kong"
)

// A program's own settings (its flags, their variables, its config file)
// may come over another tool's: its environment variables, then a file of
// its fields (a nats CLI context, say). FillGroup is that lower layer: a
// kong AfterApply hook calls it for each group of settings that the other
// tool gives together, so that two ways of logging in are never mixed.

// Setting is one setting as each layer names it: the program's flag, the
// other tool's environment variable ("" if it has none) and its file's
// field.
type Setting struct{ Flag, Env, Field string }

// Source is where FillGroup took a group's values from.
type Source int

const (
	FromNone   Source = iota // the program's own settings give the group, or no layer does
	FromEnv                  // the other tool's variables
	FromFields               // the file's fields
)

// SelectedFlags are the flags of the selected command and its parents, by
// name: the flags map of FillGroup.
func SelectedFlags(kctx *kong.Context) map[string]*kong.Flag {
	flags := map[string]*kong.Flag{}
	for _, f := range kctx.Flags() {
		flags[f.Name] = f
	}
	return flags
}

// Given says whether the program's own settings set f: the command line,
// a resolver such as the config file (both on kctx's path) or its
// variable. Call it in AfterApply hooks, once the values are in.
func Given(kctx *kong.Context, f *kong.Flag) bool {
	for _, p := range kctx.Path {
		if p.Flag == f {
			return true
		}
	}
	for _, env := range f.Envs {
		if _, ok := os.LookupEnv(env); ok {
			return true
		}
	}
	return false
}

// FillGroup sets the string flags of group from the other tool's
// variables (those set and not empty), or else, if field is not nil, from
// field, unless a flag of the group is not among flags or is Given. Before
// the flags are set, check (if not nil) is called with where the values
// came from and the values by flag name; it may change them, and its error
// is FillGroup's, with nothing set.
func FillGroup(kctx *kong.Context, flags map[string]*kong.Flag, group []Setting, field func(name string) string,
	check func(Source, map[string]string) error) (Source, error) {
	values := map[string]string{}
	for _, s := range group {
		f := flags[s.Flag]
		if f == nil || Given(kctx, f) {
			return FromNone, nil
		}
		if s.Env != "" && os.Getenv(s.Env) != "" {
			values[s.Flag] = os.Getenv(s.Env)
		}
	}
	from := FromEnv
	switch {
	case len(values) > 0:
	case field != nil:
		from = FromFields
		for _, s := range group {
			values[s.Flag] = field(s.Field)
		}
	default:
		return FromNone, nil
	}
	if check != nil {
		if err := check(from, values); err != nil {
			return from, err
		}
	}
	for _, s := range group {
		flags[s.Flag].Target.SetString(values[s.Flag])
	}
	return from, nil
}
