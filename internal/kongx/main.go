package kongx

import (
	"errors"
	"fmt"
	"io"

	"github.com/alecthomas/kong"
)

// Main's exit codes.
const (
	ExitOK      = 0
	ExitFailure = 1 // a runtime failure
	ExitUsage   = 2 // bad flags, arguments or input: the caller's
	// ExitAttention: the command did its work and found something that
	// needs a person (status): for a monitoring script, neither a failure
	// nor the caller's mistake.
	ExitAttention = 3
)

// Coded is a command's error with an exit code of its own (ExitAttention);
// Main prints it as any other.
type Coded interface {
	error
	ExitCode() int
}

// Attention is err, a command's outcome that needs a person, with the exit
// code ExitAttention.
func Attention(err error) error { return coded{err, ExitAttention} }

type coded struct {
	error
	code int
}

func (c coded) ExitCode() int { return c.code }
func (c coded) Unwrap() error { return c.error }

// Program is what Main needs of a command line.
type Program struct {
	// Name is the program's name, said before an error when no command is
	// selected yet. Required.
	Name string
	// Parser builds the parser, writing to stdout and stderr. It must give
	// kong.Exit(Exit): kong's exits (after --help) then return their code
	// from Main instead of ending the process. Required.
	Parser func(stdout, stderr io.Writer) (*kong.Kong, error)
	// Usage says whether a command's error is the caller's (ExitUsage).
	// Default nil: none is.
	Usage func(error) bool
}

// exitRequest carries kong's exit out of Parse as a panic (Exit), for
// Main to recover.
type exitRequest int

// Exit is the function to give kong.Exit for Main.
func Exit(code int) { panic(exitRequest(code)) }

// Main parses args, runs the selected command with binds and maps its
// outcome to an exit code. A usage error (the parser's, an empty value,
// or one Program.Usage claims) is printed with where the command's help
// is: ExitUsage. Any other error is printed after the command's name:
// its own code if it is Coded, else
// ExitFailure. No arguments at all print the usage, asked for by mistake,
// to stderr.
func (p Program) Main(args []string, stdout, stderr io.Writer, binds ...any) (code int) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(exitRequest)
			if !ok {
				panic(r)
			}
			code = int(e)
		}
	}()
	if len(args) == 0 {
		return p.noArguments(stderr)
	}
	parser, err := p.Parser(stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", p.Name, err)
		return ExitFailure
	}
	kctx, err := parser.Parse(args)
	if err != nil {
		var perr *kong.ParseError
		if errors.As(err, &perr) {
			return usage(stderr, p.commandName(perr.Context), err)
		}
		return usage(stderr, p.Name, err)
	}
	name := p.commandName(kctx)
	if err := CheckNotEmpty(kctx); err != nil {
		return usage(stderr, name, err)
	}
	err = kctx.Run(binds...)
	switch {
	case err == nil:
		return ExitOK
	case p.Usage != nil && p.Usage(err):
		return usage(stderr, name, err)
	default:
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		if c := Coded(nil); errors.As(err, &c) {
			return c.ExitCode()
		}
		return ExitFailure
	}
}

// noArguments prints the usage where errors go.
func (p Program) noArguments(stderr io.Writer) int {
	parser, err := p.Parser(stderr, stderr)
	var kctx *kong.Context
	if err == nil {
		kctx, err = kong.Trace(parser, nil)
	}
	if err == nil {
		err = kctx.PrintUsage(false)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", p.Name, err)
	}
	return ExitUsage
}

// commandName is the program's name and the command kctx selected so far.
func (p Program) commandName(kctx *kong.Context) string {
	if kctx == nil || kctx.Selected() == nil {
		return p.Name
	}
	return kctx.Selected().FullPath()
}

// usage reports a usage error in one format: the command, the error, and
// where its help is.
func usage(stderr io.Writer, name string, err error) int {
	var missing *MissingValueError
	if errors.As(err, &missing) {
		err = missing // kong's prefix would name the flag twice
	}
	fmt.Fprintf(stderr, "%s: %v\nRun '%s --help' for usage.\n", name, err, name)
	return ExitUsage
}
