// Package kongx is a toolkit around github.com/alecthomas/kong for a
// program's command line: what kong leaves to each program, written once
// and driven by the kong model, so that it never goes stale. It knows
// nothing of any one program; the program gives its name, its variables'
// prefix and its own tables.
//
//   - Options: kong's options for strict values: a flag without a value, or
//     followed by another flag, is a *MissingValueError; durations take days
//     and weeks (7d, 2w); negative numbers are values; help lines show each
//     flag's variable. CheckNotEmpty refuses an empty value after parsing.
//   - ReadConfigFlag and LoadConfig: a TOML config file as a kong resolver,
//     with a table per command and subcommand, every key checked against
//     the model ("did you mean", Suggest).
//   - CompletionCmd and CompleteCmd: bash, zsh and fish completion, the
//     candidates computed by the binary itself from the model (Complete).
//   - WriteReference: a Markdown reference of every command and flag, for a
//     golden test to keep beside --help.
//   - Program.Main: parse, run, and one exit code and message format for
//     each outcome (0; 1 a runtime failure; 2 the caller's error, with where
//     the command's help is), kong's exits (--help) returned, not taken.
//   - Given: whether the program's own settings set a flag, not its
//     default, for settings of another tool to come under them.
//
// A program wires it in as:
//
//	type cli struct {
//		Config     configFlag          `help:"read flag values from this TOML file" placeholder:"FILE"`
//		Run        runCmd              `cmd:"" help:"..."`
//		Completion kongx.CompletionCmd `cmd:"" help:"print a shell completion script: bash, zsh or fish"`
//		Complete   kongx.CompleteCmd   `cmd:"" name:"__complete" hidden:"" help:"complete a command line"`
//	}
//
//	type configFlag string
//
//	func (configFlag) BeforeResolve(kctx *kong.Context, trace *kong.Path) error {
//		return kongx.ReadConfigFlag(kctx, trace)
//	}
//
//	opts, err := kongx.Options(kongx.Config{Name: "app", EnvPrefix: "APP"})
//	if err != nil { ... }
//	parser, err := kong.New(&cli{}, opts...)
//	kctx, err := parser.Parse(os.Args[1:])
//	if err == nil {
//		err = kongx.CheckNotEmpty(kctx)
//	}
package kongx
