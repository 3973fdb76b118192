package kongx_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"

	"github.com/jetledger/jetledger/internal/kongx"
)

// app is a small command line with what kongx works on: a config flag,
// strings, numbers, durations, an enum, commands and subcommands.
type app struct {
	Config     configFlag          `help:"read flag values from this TOML file" placeholder:"FILE"`
	DB         string              `help:"the database" placeholder:"FILE" default:"app.db"`
	Level      string              `help:"log level" enum:"debug,info" default:"info"`
	Run        runCmd              `cmd:"" help:"run it"`
	Outbox     outboxCmd           `cmd:"" help:"the outbox"`
	Completion kongx.CompletionCmd `cmd:"" help:"print a shell completion script"`
	Complete   kongx.CompleteCmd   `cmd:"" name:"__complete" hidden:"" help:"complete a command line"`
}

type runCmd struct {
	Deadline   time.Duration `help:"deadline" default:"10s"`
	MaxDeliver int           `help:"deliveries" default:"5"`
	Subjects   string        `help:"subjects"`
}

type outboxCmd struct {
	List   outboxListCmd   `cmd:"" help:"list rows"`
	Cancel outboxCancelCmd `cmd:"" help:"cancel a row"`
}

type outboxListCmd struct {
	Status string `help:"only rows in this status" values:"queued,sent"`
}

type outboxCancelCmd struct {
	ID string `arg:"" help:"the row"`
}

type configFlag string

func (configFlag) BeforeResolve(kctx *kong.Context, trace *kong.Path) error {
	return kongx.ReadConfigFlag(kctx, trace)
}

func newApp(tb testing.TB, root *app, stdout *bytes.Buffer) *kong.Kong {
	tb.Helper()
	opts, err := kongx.Options(kongx.Config{Name: "app", EnvPrefix: "APP"})
	if err != nil {
		tb.Fatal(err)
	}
	if stdout != nil {
		opts = append(opts, kong.Writers(stdout, stdout))
	}
	parser, err := kong.New(root, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return parser
}

func parse(tb testing.TB, args ...string) (*app, *kong.Context, error) {
	tb.Helper()
	root := &app{}
	kctx, err := newApp(tb, root, nil).Parse(args)
	return root, kctx, err
}

func writeFile(tb testing.TB, text string) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "app.toml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

func TestOptionsNeedAName(t *testing.T) {
	t.Parallel()
	if _, err := kongx.Options(kongx.Config{}); err == nil {
		t.Fatal("Options without a name: no error")
	}
}

// A flag without a value, or followed by another flag, is a
// *MissingValueError; a negative number is a value; durations take days.
func TestFlagValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     []string
		wantMiss *kongx.MissingValueError
	}{
		{name: "last", args: []string{"run", "--subjects"}, wantMiss: &kongx.MissingValueError{Flag: "--subjects"}},
		{name: "next flag", args: []string{"run", "--subjects", "--deadline", "1s"}, wantMiss: &kongx.MissingValueError{Flag: "--subjects", Next: "--deadline"}},
		{name: "duration last", args: []string{"run", "--deadline"}, wantMiss: &kongx.MissingValueError{Flag: "--deadline"}},
		{name: "negative", args: []string{"run", "--max-deliver", "-1", "--deadline", "1d12h"}},
		{name: "dash value after =", args: []string{"run", "--subjects=-x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root, _, err := parse(t, tt.args...)
			var miss *kongx.MissingValueError
			switch {
			case tt.wantMiss == nil && err != nil:
				t.Fatalf("%v: %v", tt.args, err)
			case tt.wantMiss != nil && (!errors.As(err, &miss) || *miss != *tt.wantMiss):
				t.Fatalf("%v: err %v, want %+v", tt.args, err, tt.wantMiss)
			}
			if tt.name == "negative" && (root.Run.MaxDeliver != -1 || root.Run.Deadline != 36*time.Hour) {
				t.Fatalf("--max-deliver %d --deadline %s", root.Run.MaxDeliver, root.Run.Deadline)
			}
		})
	}
	if _, _, err := parse(t, "run", "--deadline", "7x"); err == nil || !strings.Contains(err.Error(), "--deadline") {
		t.Fatalf("--deadline 7x: %v, want an error naming the flag", err)
	}
}

func TestCheckNotEmpty(t *testing.T) {
	t.Parallel()
	_, kctx, err := parse(t, "run", "--subjects=")
	var empty *kongx.EmptyValueError
	if err != nil || !errors.As(kongx.CheckNotEmpty(kctx), &empty) || empty.Flag != "--subjects" || empty.InFile {
		t.Fatalf("--subjects=: %v, %+v", err, empty)
	}
	_, kctx, err = parse(t, "--config", writeFile(t, "[run]\nsubjects = \"\""), "run")
	if err != nil || !errors.As(kongx.CheckNotEmpty(kctx), &empty) || !empty.InFile {
		t.Fatalf("subjects = \"\" in the file: %v, %+v", err, empty)
	}
	if _, kctx, _ = parse(t, "run", "--subjects", "a"); kongx.CheckNotEmpty(kctx) != nil {
		t.Fatal("--subjects a refused")
	}
}

// A command's table wins over the top level; the environment over the file.
func TestConfigFilePrecedence(t *testing.T) {
	cfg := writeFile(t, "db = \"top.db\"\nsubjects = [\"a.>\", \"b.>\"]\n[run]\ndeadline = \"20s\"\n[outbox.cancel]\ndb = \"cancel.db\"\n")
	root, _, err := parse(t, "--config", cfg, "run")
	if err != nil || root.DB != "top.db" || root.Run.Deadline != 20*time.Second || root.Run.Subjects != "a.>,b.>" {
		t.Fatalf("run: %v, %+v", err, root)
	}
	if root, _, err = parse(t, "--config", cfg, "outbox", "cancel", "X"); err != nil || root.DB != "cancel.db" {
		t.Fatalf("outbox cancel: %v, db %s", err, root.DB)
	}
	t.Setenv("APP_DEADLINE", "30s")
	if root, _, err = parse(t, "--config", cfg, "run"); err != nil || root.Run.Deadline != 30*time.Second {
		t.Fatalf("environment over the file: %v, %s", err, root.Run.Deadline)
	}
	if root, _, err = parse(t, "--config", cfg, "run", "--deadline", "40s"); err != nil || root.Run.Deadline != 40*time.Second {
		t.Fatalf("command line over the environment: %v, %s", err, root.Run.Deadline)
	}
}

// A key that is no flag, or a table that is no command, or a flag that acts
// before the file is read, is a *ConfigFileError naming the file.
func TestConfigFileRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, text, want string
	}{
		{name: "typo", text: `dbb = "x"`, want: `unknown key "dbb" (no command has --dbb), did you mean "db"?`},
		{name: "not this command's", text: "[outbox]\ndeadline = \"1s\"", want: `[outbox] has no --deadline`},
		{name: "no such command", text: "[rnu]\ndb = \"x\"", want: `[rnu] is not a command, did you mean "run"?`},
		{name: "config", text: `config = "x.toml"`, want: `"config" is not settable in a config file`},
		{name: "help", text: `help = true`, want: `"help" is not settable in a config file`},
		{name: "array of tables", text: "[[run]]\ndb = \"x\"", want: "[[run]] is an array of tables"},
		{name: "a date", text: "[outbox.list]\nstatus = 2026-01-02T00:00:00Z", want: "status: a time.Time cannot be a flag's value"},
		{name: "bad value", text: "[run]\ndeadline = \"7x\"", want: "in config file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := writeFile(t, tt.text)
			_, _, err := parse(t, "--config", cfg, "run")
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), cfg) {
				t.Fatalf("err = %v, want %s and the file named", err, tt.want)
			}
			if tt.name != "bad value" && !errors.As(err, new(*kongx.ConfigFileError)) {
				t.Fatalf("err = %v, want a *ConfigFileError", err)
			}
		})
	}
	missing := filepath.Join(t.TempDir(), "none.toml")
	if _, _, err := parse(t, "--config", missing, "run"); !errors.As(err, new(*kongx.ConfigFileError)) || !strings.HasSuffix(err.Error(), "config file "+missing+": no such file") {
		t.Fatalf("a missing file: %v", err)
	}
	if _, _, err := parse(t, "--config=", "run"); err == nil || !strings.Contains(err.Error(), "--config is empty") {
		t.Fatalf("--config=: %v", err)
	}
}

func TestComplete(t *testing.T) {
	t.Parallel()
	parser := newApp(t, &app{}, nil)
	tests := []struct {
		words, want []string
	}{
		{nil, []string{"completion", "outbox", "run"}}, // not the hidden __complete
		{[]string{"r"}, []string{"run"}},
		{[]string{"run", "--d"}, []string{"--db", "--deadline"}},
		{[]string{"run", "--db", ""}, nil}, // a value: the shell completes file names
		{[]string{"--level", ""}, []string{"debug", "info"}},
		{[]string{"--level=d"}, []string{"--level=debug"}},
		{[]string{"--level", "=", "i"}, []string{"info"}}, // bash splits words at '='
		{[]string{"outbox", "list", "--status", "q"}, []string{"queued"}},
		{[]string{"--db=x", "outbox", "c"}, []string{"cancel"}},
		{[]string{"completion", "z"}, []string{"zsh"}},
	}
	for _, tt := range tests {
		if got := kongx.Complete(parser.Model.Node, tt.words); !slices.Equal(got, tt.want) {
			t.Errorf("Complete(%q) = %q, want %q", tt.words, got, tt.want)
		}
	}
	if f := kongx.FindFlag(parser.Model.Node, "-h"); f == nil || f.Name != "help" {
		t.Errorf("FindFlag(-h) = %v, want --help", f)
	}
}

// The completion commands run the model's program by its name.
func TestCompletionCommands(t *testing.T) {
	t.Parallel()
	for shell, marker := range map[string]string{"bash": "complete -o default -F _app app ./app", "zsh": "compdef _app app", "fish": "complete -c app"} {
		var out bytes.Buffer
		kctx, err := newApp(t, &app{}, &out).Parse([]string{"completion", shell})
		if err == nil {
			err = kctx.Run()
		}
		if err != nil || !strings.Contains(out.String(), marker) || strings.Contains(out.String(), "PROG") {
			t.Fatalf("completion %s: %v\n%s", shell, err, out.String())
		}
	}
	if s := kongx.CompletionScript("tcsh", "app"); s != "" {
		t.Fatalf("tcsh: %q", s)
	}
	var out bytes.Buffer
	kctx, err := newApp(t, &app{}, &out).Parse([]string{"__complete", "--", "run", "--dead"})
	if err == nil {
		err = kctx.Run()
	}
	if err != nil || out.String() != "--deadline\n" {
		t.Fatalf("__complete: %v, %q", err, out.String())
	}
}

func TestWriteReference(t *testing.T) {
	t.Parallel()
	parser := newApp(t, &app{}, nil)
	var b bytes.Buffer
	if err := kongx.WriteReference(&b, parser.Model, kongx.ReferenceConfig{Generator: "gen", Regenerate: "go generate"}); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{
		"# app command-line reference\n\n<!-- Generated from the kong model by gen; do not edit.\n     Regenerate: go generate -->\n",
		"| `--config` | kongx_test.configFlag |  | `APP_CONFIG` |",
		"| `--level` | one of debug, info | `info` | `APP_LEVEL` | log level |",
		"## app run\n\nrun it\n\n",
		"| `--deadline` | time.Duration | `10s` | `APP_DEADLINE` | deadline |",
		"## app outbox cancel\n\ncancel a row\n\n- argument `id` (string), required: the row\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("reference lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "__complete") {
		t.Errorf("reference shows the hidden command")
	}
	b.Reset()
	if err := kongx.WriteReference(&b, parser.Model, kongx.ReferenceConfig{}); err != nil || !strings.Contains(b.String(), "<!-- Generated from the kong model; do not edit. -->\n") {
		t.Fatalf("without a generator: %v\n%s", err, b.String())
	}
}

// A flag is given by the command line, the config file or its variable,
// even an empty one; not by its default.
func TestGiven(t *testing.T) {
	cfg := writeFile(t, "[run]\nsubjects = \"file.>\"\n")
	tests := []struct {
		name string
		args []string
		env  string // APP_DB's value, if set
		want map[string]bool
	}{
		{name: "defaults", args: []string{"run"}, want: map[string]bool{"db": false, "deadline": false, "subjects": false}},
		{name: "command line", args: []string{"--db", "x.db", "run", "--deadline", "5s"}, want: map[string]bool{"db": true, "deadline": true, "subjects": false}},
		{name: "config file", args: []string{"--config", cfg, "run"}, want: map[string]bool{"db": false, "subjects": true}},
		{name: "variable", args: []string{"run"}, env: "env.db", want: map[string]bool{"db": true}},
		{name: "empty variable", args: []string{"run"}, env: "", want: map[string]bool{"db": true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.env != "" || tt.name == "empty variable" {
				t.Setenv("APP_DB", tt.env)
			}
			_, kctx, err := parse(t, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			flags := kongx.SelectedFlags(kctx)
			for name, want := range tt.want {
				if got := kongx.Given(kctx, flags[name]); got != want {
					t.Errorf("%q: Given(--%s) = %t, want %t", tt.args, name, got, want)
				}
			}
		})
	}
}
