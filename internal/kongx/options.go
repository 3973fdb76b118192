package kongx

import (
	"errors"
	"strings"

	"github.com/alecthomas/kong"
)

// Config is what Options needs to know of the program.
type Config struct {
	// Name is the program's name (kong.Name), as usage and errors say it
	// and as the completion scripts call it. Required.
	Name string
	// EnvPrefix gives every flag a variable: EnvPrefix, '_' and the flag's
	// name in capitals with '-' as '_' (kong.DefaultEnvars). Default "": no
	// variables beyond those of env tags.
	EnvPrefix string
}

// Options are kong's options for the command line Config describes: its
// name and variables; mappers of strings, integers and durations that
// refuse a missing value (a *MissingValueError) and read durations with
// days and weeks (7d, 2w); negative numbers as values (--max-deliver -1);
// and help lines that show a flag's variable, and its default where a
// placeholder hides it. Give them to kong.New before the program's own.
func Options(cfg Config) ([]kong.Option, error) {
	if cfg.Name == "" {
		return nil, errors.New("kongx: options: Config.Name is empty")
	}
	opts := []kong.Option{
		kong.Name(cfg.Name),
		// With a resolver in place, kong reports a bad environment value
		// only when the command line does not override the flag.
		kong.Resolvers(kong.ResolverFunc(func(*kong.Context, *kong.Path, *kong.Flag) (any, error) { return nil, nil })),
		kong.ValueFormatter(HelpValue),
		// A negative number is a value (--max-deliver -1); valueMappers
		// refuse the other words that start with '-', and a missing value.
		kong.WithHyphenPrefixedParameters(true),
	}
	if cfg.EnvPrefix != "" {
		opts = append(opts, kong.DefaultEnvars(cfg.EnvPrefix))
	}
	return append(opts, valueMappers()...), nil
}

// HelpValue is a flag's help line (a kong.HelpValueFormatter): its text,
// its default where the placeholder (FILE, URL) hides it, and its
// environment variable.
func HelpValue(v *kong.Value) string {
	s := v.Help
	if v.HasDefault && v.Default != "" && v.Flag != nil && v.Flag.PlaceHolder != "" {
		s += " (default " + v.Default + ")"
	}
	if len(v.Tag.Envs) > 0 {
		s += " ($" + strings.Join(v.Tag.Envs, ", $") + ")"
	}
	return s
}
