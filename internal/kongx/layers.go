package kongx

import (
	"os"

	"github.com/alecthomas/kong"
)

// A program's own settings (its flags, their variables, its config file)
// may come over another tool's. Which of its own it gave is not in the
// flags' values: a default looks the same as a value given.

// SelectedFlags are the flags of the selected command and its parents, by
// name.
func SelectedFlags(kctx *kong.Context) map[string]*kong.Flag {
	flags := map[string]*kong.Flag{}
	for _, f := range kctx.Flags() {
		flags[f.Name] = f
	}
	return flags
}

// Given says whether the program's own settings set f, even to "": the
// command line, a resolver such as the config file (both on kctx's path)
// or its variable; not its default. Call it in AfterApply hooks, once the
// values are in.
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
