package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"
	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/internal/kongx"
	"github.com/jetledger/jetledger/ledger"
)

// parseArgs parses args as main does, without running the command.
func parseArgs(args ...string) (*cli, error) {
	root := &cli{}
	parser, err := newParser(root, io.Discard, io.Discard)
	if err != nil {
		return nil, err
	}
	_, err = parser.Parse(args)
	return root, err
}

// runMain runs the binary's main in process and returns its exit code and output.
func runMain(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = mainExit(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// commandPaths are every visible command of the binary, subcommands included.
func commandPaths(tb testing.TB) [][]string {
	tb.Helper()
	parser, err := newParser(&cli{}, io.Discard, io.Discard)
	if err != nil {
		tb.Fatal(err)
	}
	var paths [][]string
	var walk func(n *kong.Node, path []string)
	walk = func(n *kong.Node, path []string) {
		for _, c := range n.Children {
			if c.Hidden {
				continue
			}
			p := append(slices.Clone(path), c.Name)
			paths = append(paths, p)
			walk(c, p)
		}
	}
	walk(parser.Model.Node, nil)
	return paths
}

// Each --help prints its command's help once, on standard output, exit 0;
// `jetledger help CMD` prints the same.
func TestHelpOncePerCommand(t *testing.T) {
	t.Parallel()
	for _, path := range commandPaths(t) {
		name := strings.Join(path, " ")
		code, out, errOut := runMain(append(slices.Clone(path), "--help")...)
		if code != exitOK || errOut != "" {
			t.Fatalf("%s --help: exit %d, stderr %q", name, code, errOut)
		}
		if n := strings.Count(out, "Usage: jetledger "+name); n != 1 {
			t.Fatalf("%s --help prints its usage %d times:\n%s", name, n, out)
		}
		code, viaHelp, _ := runMain(append([]string{"help"}, path...)...)
		if code != exitOK || viaHelp != out {
			t.Fatalf("help %s: exit %d, output differs from --help:\n%s", name, code, viaHelp)
		}
	}
	if code, _, _ := runMain("help", "frobnicate"); code != exitUsage {
		t.Fatalf("help of an unknown command: exit %d, want %d", code, exitUsage)
	}
}

// An unknown flag or command is one line on standard error with the
// closest name, and a line saying where the help is, exit 2; nothing on
// standard output.
func TestUnknownNamesOneLineDidYouMean(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"run", "--dbb", "x"}, `jetledger run: unknown flag --dbb, did you mean "--db"?`},
		{[]string{"outbox", "list", "--limt", "3"}, `jetledger outbox list: unknown flag --limt, did you mean "--limit"?`},
		{[]string{"rnu"}, `jetledger: unexpected argument rnu, did you mean "run"?`},
		{[]string{"ledger", "stat"}, `jetledger ledger: unexpected argument stat, did you mean "stats"?`},
	}
	for _, tt := range tests {
		code, out, errOut := runMain(tt.args...)
		name, _, _ := strings.Cut(tt.wantErr, ":")
		want := tt.wantErr + "\nRun '" + name + " --help' for usage.\n"
		if code != exitUsage || out != "" || errOut != want {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and only %q", tt.args, code, out, errOut, exitUsage, want)
		}
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	code, cmdOut, _ := runMain("version")
	flagCode, flagOut, _ := runMain("--version")
	if code != exitOK || flagCode != exitOK || cmdOut != flagOut || !strings.HasPrefix(cmdOut, "jetledger ") || strings.Count(cmdOut, "\n") != 1 {
		t.Fatalf("version: exit %d %q; --version: exit %d %q", code, cmdOut, flagCode, flagOut)
	}
	bi := &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: "github.com/jetledger/jetledger", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"},
			{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "arm64"}}}
	if got, want := formatVersion(bi), "jetledger v1.2.3 commit 0123456789ab+dirty (2026-01-02T03:04:05Z) go1.99.1 linux/arm64"; got != want {
		t.Fatalf("formatVersion = %q, want %q", got, want)
	}
	bi.Settings, bi.Main.Version = nil, ""
	if got := formatVersion(bi); !strings.Contains(got, "(devel) commit unknown go1.99.1") {
		t.Fatalf("without VCS stamping: %q", got)
	}
}

func TestCompletionScripts(t *testing.T) {
	t.Parallel()
	for shell, marker := range map[string]string{"bash": "complete -o default -F _jetledger jetledger ./jetledger", "zsh": "compdef _jetledger jetledger", "fish": "complete -c jetledger"} {
		code, out, _ := runMain("completion", shell)
		if code != exitOK || !strings.Contains(out, marker) || !strings.Contains(out, "__complete") {
			t.Fatalf("completion %s: exit %d\n%s", shell, code, out)
		}
	}
	if code, _, _ := runMain("completion", "tcsh"); code != exitUsage {
		t.Fatalf("completion tcsh: exit %d, want %d", code, exitUsage)
	}
}

func TestCompletions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		words, want []string
	}{
		{[]string{"ru"}, []string{"run"}},
		{[]string{"d"}, []string{"demo", "dlq"}}, // not the hidden demo-consumer
		{[]string{"run", "--d"}, []string{"--db", "--db-max-size", "--deadline", "--duplicate-window", "--durable"}},
		{[]string{"run", "--db", "x.db", "--dea"}, []string{"--deadline"}},
		{[]string{"run", "--db", ""}, nil}, // a value: the shell completes file names
		{[]string{"outbox", "re"}, []string{"resolve", "retry", "review"}},
		{[]string{"outbox", "cancel", "--webhook-d"}, []string{"--webhook-delete-url"}},
		{[]string{"--json", "ledger", "--db=x", "s"}, []string{"stats"}},
		{[]string{"completion", ""}, []string{"bash", "fish", "zsh"}},
		{[]string{"completion", "z"}, []string{"zsh"}},
		{[]string{"help", "ou"}, []string{"outbox"}},
		{[]string{"help", "outbox", "re"}, []string{"resolve", "retry", "review"}},
		{[]string{"run", "--log-level", ""}, []string{"debug", "error", "info", "warn"}},
		{[]string{"check", "--log-format", "j"}, []string{"json"}},
		{[]string{"outbox", "resolve", "ID", "--as", ""}, []string{"failed", "sent"}},
		{[]string{"outbox", "list", "--status", "s"}, []string{"sending", "sent", "suppressed"}},
		{[]string{"run", "--log-level=w"}, []string{"--log-level=warn"}},
		{[]string{"run", "--log-level", "=", "d"}, []string{"debug"}}, // bash splits words at '='
		{[]string{"run", "--log-level", "="}, []string{"debug", "error", "info", "warn"}},
	}
	parser, err := newParser(&cli{}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		if got := kongx.Complete(parser.Model.Node, tt.words); !slices.Equal(got, tt.want) {
			t.Errorf("completions(%q) = %q, want %q", tt.words, got, tt.want)
		}
	}
	code, out, _ := runMain("__complete", "--", "run", "--dead")
	if code != exitOK || out != "--deadline\n" {
		t.Fatalf("__complete: exit %d, %q", code, out)
	}
	status := kongx.FindFlag(kongx.FindCommand(kongx.FindCommand(parser.Model.Node, "outbox"), "list"), "--status")
	if got := kongx.ValuesOf(status.Value); !slices.Equal(got, slicesOf(ledger.Statuses)) {
		t.Fatalf("outbox list --status completes %q, want the ledger's statuses %q", got, ledger.Statuses)
	}
}

func slicesOf[S ~string](in []S) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = string(s)
	}
	return out
}

// Every flag has its environment variable: JETLEDGER_ and the name in
// capitals with '-' as '_'.
func TestEveryFlagHasItsEnvironmentVariable(t *testing.T) {
	t.Parallel()
	parser, err := newParser(&cli{}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	err = kong.Visit(parser.Model, func(node kong.Visitable, next kong.Next) error {
		if f, ok := node.(*kong.Flag); ok && f.Name != "help" && f.Name != "version" {
			n++
			want := "JETLEDGER_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
			if !slices.Equal(f.Envs, []string{want}) {
				return fmt.Errorf("--%s: environment %v, want %s", f.Name, f.Envs, want)
			}
		}
		return next(nil)
	})
	if err != nil || n < 50 {
		t.Fatalf("%v (%d flags)", err, n)
	}
}

func writeConfig(tb testing.TB, text string) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "jetledger.toml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

// The command line wins over the environment, the environment over the
// config file, the file over the default; in the file a command's table
// wins over the top level, a subcommand's over its command's.
func TestFlagPrecedence(t *testing.T) {
	cfg := writeConfig(t, `
deadline = "20s"
db = "top.db"
subjects = ["a.>", "b.>"]
max-deliver = -1
allow-seq-ids = true
[check]
deadline = "25s"
[outbox]
db = "outbox.db"
[outbox.cancel]
db = "cancel.db"
`)
	run := func(args ...string) *cli {
		t.Helper()
		root, err := parseArgs(args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return root
	}
	if got := run("run").Run.Plan.Deadline; got != ackwait.DeadlineDefault {
		t.Fatalf("default: deadline %s", got)
	}
	r := run("--config", cfg, "run").Run
	if r.Plan.Deadline != 20*time.Second || r.DB != "top.db" || r.Subjects != "a.>,b.>" || r.MaxDeliver != -1 || !r.AllowSeqIDs {
		t.Fatalf("config: %+v", r)
	}
	if got := run("check", "--config", cfg).Check.Plan.Deadline; got != 25*time.Second {
		t.Fatalf("[check] table: deadline %s, want 25s", got)
	}
	root := run("--config", cfg, "outbox", "cancel", "X")
	if root.Outbox.DB != "cancel.db" {
		t.Fatalf("[outbox.cancel]: db %s", root.Outbox.DB)
	}
	if got := run("--config", cfg, "outbox", "list").Outbox.DB; got != "outbox.db" {
		t.Fatalf("[outbox] for outbox list: db %s", got)
	}
	t.Setenv("JETLEDGER_CONFIG", cfg)
	if got := run("run").Run.Plan.Deadline; got != 20*time.Second {
		t.Fatalf("config from JETLEDGER_CONFIG: deadline %s", got)
	}
	t.Setenv("JETLEDGER_DEADLINE", "30s")
	if got := run("run").Run.Plan.Deadline; got != 30*time.Second {
		t.Fatalf("environment over config: deadline %s", got)
	}
	if got := run("check").Check.Plan.Deadline; got != 30*time.Second {
		t.Fatalf("environment over a command's table: deadline %s", got)
	}
	if got := run("run", "--deadline", "40s").Run.Plan.Deadline; got != 40*time.Second {
		t.Fatalf("command line over environment: deadline %s", got)
	}
}

// A key that is no flag, or a table that is no command, is an error naming
// it (exit 2): a typo in a host's file must not be silent.
func TestConfigFileRefusesUnknownKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, text, want string
	}{
		{name: "typo", text: `dealine = "1s"`, want: `"dealine"`},
		{name: "not this command's", text: "[publish]\ndeadline = \"1s\"", want: `"deadline"`},
		{name: "no such command", text: "[rnu]\ndb = \"x\"", want: "[rnu]"},
		{name: "no such subcommand", text: "[outbox.cancle]\ndb = \"x\"", want: "[outbox.cancle]"},
		{name: "config in config", text: `config = "other.toml"`, want: `"config" is not settable in a config file`},
		{name: "help", text: `help = true`, want: `"help" is not settable in a config file`},
		{name: "version", text: "[run]\nversion = true", want: `"version" is not settable in a config file`},
		{name: "array of tables", text: "[[run]]\ndb = \"x\"", want: "[[run]] is an array of tables; a command's flags go in one table: [run]"},
		{name: "array of tables of no command", text: "[[rnu]]\ndb = \"x\"", want: `[[rnu]] is not a command, did you mean "run"?`},
		{name: "a date", text: `since = 2026-01-02T00:00:00Z`, want: "since"},
		{name: "not TOML", text: `db = `, want: "config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := writeConfig(t, tt.text)
			_, err := parseArgs("--config", cfg, "run")
			var perr *kong.ParseError
			if !errors.As(err, &perr) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want a parse error naming %s", err, tt.want)
			}
			if !strings.Contains(err.Error(), "config file "+cfg+": ") {
				t.Fatalf("err = %v, want the file named", err)
			}
			if code, _, _ := runMain("--config", cfg, "version"); code != exitUsage {
				t.Fatalf("exit %d, want %d", code, exitUsage)
			}
		})
	}
	missing := filepath.Join(t.TempDir(), "none.toml")
	if got := usageMessage(t, "--config", missing, "run"); got != "config file "+missing+": no such file" {
		t.Fatalf("a missing file: %q", got)
	}
}

// A live consumer the plan refuses is said in the command line's terms: the
// flags and the nats CLI command that fix it, once. The library's own
// advice, in its field names, is replaced rather than repeated.
func TestPlanRefusalNamesFlags(t *testing.T) {
	t.Parallel()
	plan := ackwait.Plan{}.WithDefaults()
	short := fmt.Errorf("consumer EV/d: %w", &ackwait.TooShortError{Field: "AckWait", Have: time.Second, Need: plan.AckWait(), Plan: plan})
	err := refusal("EV", "d", 100, short)
	if !errors.Is(err, ackwait.ErrAckWaitTooShort) {
		t.Fatalf("refusal lost the library's error: %v", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "nats consumer edit EV d --wait "+plan.AckWait().String()) || strings.Count(msg, "--deadline") != 1 ||
		strings.Count(msg, "--batch") != 1 || strings.Contains(msg, "shorten the plan") {
		t.Fatalf("short AckWait: %s", msg)
	}
	backoff := refusal("EV", "d", 100, &ackwait.TooShortError{Field: "BackOff[1]", Have: time.Second, Need: plan.AckWait(), Plan: plan})
	if !strings.Contains(backoff.Error(), "BackOff[1] is 1s") || strings.Contains(backoff.Error(), "--wait") {
		t.Fatalf("short BackOff: %s", backoff)
	}
	pending := refusal("EV", "d", 100, fmt.Errorf("x: %w", ackwait.ErrMaxAckPending))
	if !errors.Is(pending, ackwait.ErrMaxAckPending) || !strings.Contains(pending.Error(), "--max-pending 100") || !strings.Contains(pending.Error(), "lower --batch") {
		t.Fatalf("MaxAckPending: %s", pending)
	}
	other := errors.New("other")
	if got := refusal("EV", "d", 100, other); got != other {
		t.Fatalf("another error: %v", got)
	}
}

// readmeBlock is the text of README.md from just after the first marker to
// the next code fence.
func readmeBlock(tb testing.TB, marker string) string {
	tb.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		tb.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), marker)
	block, _, _ := strings.Cut(after, "```")
	if !ok || block == "" {
		tb.Fatalf("README.md has no block after %q", marker)
	}
	return block
}

// The config file example of the README's Commands section is valid.
func TestReadmeConfigExample(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, readmeBlock(t, "```toml\n"))
	root, err := parseArgs("--config", cfg, "run")
	if err != nil || root.Run.Subjects != "payments.>" || root.Run.Plan.Deadline != 30*time.Second {
		t.Fatalf("run: %v, %+v", err, root.Run)
	}
	if root, err = parseArgs("--config", cfg, "outbox", "cancel", "X"); err != nil || root.Outbox.Cancel.Webhook.DeleteURL == "" {
		t.Fatalf("outbox cancel: %v", err)
	}
}

// The README's example of a short AckWait is the message run prints.
func TestReadmeAckWaitMessage(t *testing.T) {
	t.Parallel()
	block := readmeBlock(t, "```\n  jetledger run: consumer ")
	plan := ackwait.Plan{}.WithDefaults()
	want := refusal("EVENTS", "jetledger", plan.BatchSize, &ackwait.TooShortError{Field: "AckWait", Have: 3 * time.Second, Need: plan.AckWait(), Plan: plan})
	if got := "consumer " + strings.Join(strings.Fields(block), " "); got != want.Error() {
		t.Fatalf("README:\n%s\nrun prints:\n%s", got, want)
	}
}

// refusal is what run, check and status print of a consumer the plan
// refuses: the consumer's *PlanError with the flags' names.
func refusal(stream, durable string, batch int, err error) error {
	return consumer.PlanRefusal(stream, durable, batch, err, consumerNames)
}
