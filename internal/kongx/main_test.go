package kongx_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/alecthomas/kong"

	"github.com/jetledger/jetledger/internal/kongx"
)

var errCaller = errors.New("bad input")

type mainCLI struct {
	Do doCmd `cmd:"" help:"do it"`
}

type doCmd struct {
	Fail string `help:"fail: usage or runtime" enum:",usage,runtime" default:""`
	Name string `help:"a name"`
}

func (c *doCmd) Run(out *bytes.Buffer) error {
	switch c.Fail {
	case "usage":
		return errCaller
	case "runtime":
		return errors.New("disk on fire")
	}
	_, err := out.WriteString("done\n")
	return err
}

// TestMainMapsOutcomesToExitCodes: each outcome's code and message, and
// --help returning its code instead of ending the test binary.
func TestMainMapsOutcomesToExitCodes(t *testing.T) {
	p := kongx.Program{Name: "app",
		Parser: func(stdout, stderr io.Writer) (*kong.Kong, error) {
			opts, err := kongx.Options(kongx.Config{Name: "app"})
			if err != nil {
				return nil, err
			}
			return kong.New(&mainCLI{}, append(opts, kong.Writers(stdout, stderr), kong.Exit(kongx.Exit))...)
		},
		Usage: func(err error) bool { return errors.Is(err, errCaller) }}
	for _, tt := range []struct {
		args         []string
		code         int
		stdout, errs string
	}{
		{[]string{"do"}, kongx.ExitOK, "done", ""},
		{[]string{"do", "--fail", "runtime"}, kongx.ExitFailure, "", "app do: disk on fire\n"},
		{[]string{"do", "--fail", "usage"}, kongx.ExitUsage, "", "app do: bad input\nRun 'app do --help' for usage.\n"},
		{[]string{"do", "--nme", "x"}, kongx.ExitUsage, "", "did you mean"},
		{[]string{"do", "--name="}, kongx.ExitUsage, "", "--name"},
		{[]string{"nope"}, kongx.ExitUsage, "", "Run 'app --help' for usage."},
		{[]string{"do", "--help"}, kongx.ExitOK, "a name", ""},
		{nil, kongx.ExitUsage, "", "Usage: app"},
	} {
		var stdout, stderr bytes.Buffer
		code := p.Main(tt.args, &stdout, &stderr, &stdout)
		if code != tt.code || !strings.Contains(stdout.String(), tt.stdout) || !strings.Contains(stderr.String(), tt.errs) {
			t.Errorf("Main(%q) = %d, stdout %q, stderr %q; want %d, %q, %q", tt.args, code, stdout.String(), stderr.String(), tt.code, tt.stdout, tt.errs)
		}
	}
}
