package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/internal/kongx"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/stream"
)

// usageMessage runs args and wants a usage error in the one format of every
// usage error, the parser's and the commands': exit 2, nothing on standard
// output, and on standard error "jetledger CMD: MESSAGE" and where the help
// is. It returns MESSAGE.
func usageMessage(tb testing.TB, args ...string) string {
	tb.Helper()
	code, out, errOut := runMain(args...)
	lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
	name, msg, ok := strings.Cut(lines[0], ": ")
	if code != exitUsage || out != "" || len(lines) != 2 || !ok || lines[1] != "Run '"+name+" --help' for usage." {
		tb.Fatalf("%q: exit %d, stdout %q, stderr:\n%s\nwant exit %d and a usage error", args, code, out, errOut, exitUsage)
	}
	return msg
}

// assertEmpty fails unless dir holds nothing: no database, no server store.
func assertEmpty(tb testing.TB, dir string, args []string) {
	tb.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	if len(entries) > 0 {
		tb.Fatalf("%q left %s behind", args, entries[0].Name())
	}
}

// A flag that takes a value, given none, is a usage error naming it: it must
// not take the next flag as its value, nor an empty one.
func TestFlagWithoutValueIsAUsageError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "l.db")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"run", "--db", db, "--webhook"}, "--webhook needs a value"},
		{[]string{"run", "--db"}, "--db needs a value"},
		{[]string{"ledger", "stats", "--db", "--json"}, "--db needs a value, not the flag --json (write --db=VALUE for a value that starts with '-')"},
		{[]string{"run", "--db", db, "--deadline"}, "--deadline needs a value"},
		{[]string{"run", "--db", db, "--max-deliver", "--json"}, "--max-deliver needs a value, not the flag --json (write --max-deliver=VALUE for a value that starts with '-')"},
		{[]string{"run", "--db", db, "--sync-interval"}, "--sync-interval needs a value"},
		{[]string{"publish", "--subject", "--data", "{}"}, "--subject needs a value, not the flag --data (write --subject=VALUE for a value that starts with '-')"},
		{[]string{"--config"}, "--config needs a value"},
	}
	for _, tt := range tests {
		if got := usageMessage(t, tt.args...); got != tt.want {
			t.Errorf("%q: %q, want %q", tt.args, got, tt.want)
		}
	}
	assertEmpty(t, dir, nil)
}

// A negative number is a value, with or without '=' (--max-deliver -1 is
// documented); so is anything after '='.
func TestNegativeNumbersAreValues(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"run", "--max-deliver", "-1"}, {"run", "--max-deliver=-1"}} {
		root, err := parseArgs(args...)
		if err != nil || root.Run.MaxDeliver != -1 {
			t.Fatalf("%q: max-deliver %d, %v", args, root.Run.MaxDeliver, err)
		}
	}
	root, err := parseArgs("run", "--apply=-- a comment\nSELECT 1", "--deadline", "-5s")
	if err != nil || root.Run.Apply != "-- a comment\nSELECT 1" || root.Run.Plan.Deadline >= 0 {
		t.Fatalf("run: %v, %+v", err, root.Run)
	}
}

// An explicitly empty value, on the command line or in the config file, is
// a usage error naming the flag: `--webhook "$URL"` with URL unset must not
// consume without effects.
func TestEmptyValueIsAUsageError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "l.db")
	for _, flag := range []string{"--db", "--stream", "--durable", "--webhook", "--nats", "--apply"} {
		args := []string{"run", "--db", db, "--listen", "127.0.0.1:0", flag, ""}
		if got := usageMessage(t, args...); !strings.HasPrefix(got, flag+" is empty") {
			t.Errorf("%q: %q", args, got)
		}
	}
	cfg := writeConfig(t, "[run]\nwebhook = \"\"\n")
	if got := usageMessage(t, "--config", cfg, "run", "--db", db); !strings.HasPrefix(got, "--webhook is empty in the config file") {
		t.Errorf("config: %q", got)
	}
	assertEmpty(t, dir, nil)
}

// Every flag of run and replay is checked before anything is done: a bad
// value exits 2 naming that flag, and only it, with no database, no server
// store and no server started.
func TestBadValuesRefusedBeforeAnyIO(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args    []string
		flag    string
		notWant []string // other flags the message must not name
	}{
		{[]string{"run", "--db", "a?b.db"}, "--db", nil},
		{[]string{"run", "--stream", "a.b"}, "--stream", nil},
		{[]string{"run", "--stream", "a*"}, "--stream", nil},
		{[]string{"run", "--stream", "a>"}, "--stream", nil},
		{[]string{"run", "--stream", "a b"}, "--stream", nil},
		{[]string{"run", "--stream", `a\b`}, "--stream", nil},
		{[]string{"run", "--durable", "x.y"}, "--durable", nil},
		{[]string{"run", "--durable", strings.Repeat("d", stream.MaxNameLen+1)}, "--durable", nil},
		{[]string{"run", "--subjects", "a..b"}, "--subjects", nil},
		{[]string{"run", "--retention", "-1h"}, "--retention", []string{"--outbox-retention"}},
		{[]string{"run", "--outbox-retention", "-1h"}, "--outbox-retention", nil},
		{[]string{"run", "--duplicate-window", "-1s"}, "--duplicate-window", nil},
		{[]string{"run", "--prune-interval", "-1s"}, "--prune-interval", nil},
		{[]string{"run", "--metrics", "9464"}, "--metrics", nil},
		{[]string{"run", "--metrics", "127.0.0.1:99999"}, "--metrics", nil},
		{[]string{"run", "--listen", "nowhere"}, "--listen", nil},
		{[]string{"run", "--webhook", "http://127.0.0.1:1", "--webhook-timeout", "0"}, "--webhook-timeout", []string{"Timeout"}},
		{[]string{"run", "--webhook", "http://127.0.0.1:1", "--webhook-retry-on", "200"}, "--webhook-retry-on", []string{"RetryOn"}},
		{[]string{"run", "--webhook", "ftp://127.0.0.1:1"}, "--webhook", []string{"--webhook-delete-url"}},
		{[]string{"run", "--webhook", "http://127.0.0.1:1", "--webhook-delete-url", "ftp://x/{external_id}"}, "--webhook-delete-url", nil},
		{[]string{"run", "--webhook-delete-url", "http://x/{external_id}"}, "--webhook-delete-url needs --webhook", nil},
		{[]string{"run", "--deadline", "-5s"}, "--deadline", []string{"--batch", "--buffer-wait", "--commit-margin", "--ack-margin"}},
		{[]string{"run", "--ack-margin", "48h"}, "--ack-margin", []string{"--deadline"}},
		{[]string{"run", "--batch", "0"}, "--batch", []string{"--deadline"}},
		{[]string{"run", "--outbox-workers", "0"}, "--outbox-workers", []string{"--outbox-max-attempts"}},
		{[]string{"run", "--outbox-max-attempts", "0"}, "--outbox-max-attempts", []string{"--outbox-workers"}},
		{[]string{"run", "--max-deliver", "0"}, "--max-deliver", nil},
		{[]string{"run", "--max-deliver", "-2"}, "--max-deliver", nil},
		{[]string{"run", "--schema", "no-such-schema.sql"}, "--schema", nil},
		{[]string{"run", "--log-level", "loud"}, "--log-level", nil},
		{[]string{"run", "--nats", "nats://127.0.0.1:1", "--embedded-token", "t"}, "--embedded-token", nil},
		{[]string{"replay", "--stream", "a.b"}, "--stream", nil},
		{[]string{"replay", "--webhook", "http://127.0.0.1:1", "--no-effects"}, "--no-effects", nil},
		{[]string{"replay", "--from-seq", "5", "--to-seq", "2"}, "--from-seq", nil},
		{[]string{"replay", "--since", "-1h"}, "--since", nil},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		args := slices.Clone(tt.args)
		if tt.flag != "--db" {
			args = append(args, "--db", filepath.Join(dir, "l.db"))
		}
		if tt.flag != "--listen" {
			args = append(args, "--listen", "127.0.0.1:0")
		}
		got := usageMessage(t, args...)
		if !strings.Contains(got, tt.flag) {
			t.Errorf("%q: %q does not name %s", tt.args, got, tt.flag)
		}
		for _, other := range tt.notWant {
			if strings.Contains(got, other) {
				t.Errorf("%q: %q names %s too", tt.args, got, other)
			}
		}
		assertEmpty(t, dir, tt.args)
	}
}

// A server that cannot be reached leaves no new database behind.
func TestUnreachableServerLeavesNoDatabase(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"run", "replay"} {
		dir := t.TempDir()
		args := []string{cmd, "--nats", "nats://127.0.0.1:1", "--db", filepath.Join(dir, "l.db"), "--to-seq", "1"}
		if cmd == "run" {
			args = args[:len(args)-2]
		}
		if code, _, errOut := runMain(args...); code != exitFailure || !strings.Contains(errOut, "connect to NATS") {
			t.Fatalf("%q: exit %d\n%s", args, code, errOut)
		}
		assertEmpty(t, dir, args)
	}
}

// Each message names the bad input alone.
func TestUsageMessagesNameTheBadInput(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "missing.db")
	long := strings.Repeat("i", consumer.MaxMessageIDLen+1)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"publish", "--subject", "s", "--data", "{}", "--attempts", "0"}, "--attempts 0: want 1 to 100"},
		{[]string{"publish", "--subject", "s", "--data", "{}", "--attempts", "101"}, "--attempts 101: want 1 to 100"},
		{[]string{"publish", "--subject", "s", "--data", "{}", "--timeout", "0s"}, "--timeout 0s: want more than 0 and at most 1h0m0s"},
		{[]string{"publish", "--subject", "s", "--data", "{}", "--id", long}, "--id: the id is 513 bytes; a consumer dead-letters a Nats-Msg-Id over 512 bytes, so nothing was published"},
		{[]string{"outbox", "resolve", "ID", "--db", db}, "--as is required: sent or failed"},
		{[]string{"outbox", "resolve", "ID", "--as", "done", "--db", db}, `--as "done": want sent or failed`},
		{[]string{"outbox", "resolve", "", "--as", "failed", "--db", db}, "the row's id is required (see 'outbox list')"},
		{[]string{"outbox", "retry", "", "--db", db}, "the row's id is required (see 'outbox list')"},
		{[]string{"outbox", "list", "--limit", "-1", "--db", db}, "--limit -1: want 0 (all) or more"},
		{[]string{"status", "--stream", "a.b", "--db", db}, `--stream "a.b": a NATS name may not contain '.', '*', '>', '/', '\' or whitespace`},
		{[]string{"check", "--durable", "a b"}, `--durable "a b": a NATS name may not contain '.', '*', '>', '/', '\' or whitespace`},
		{[]string{"ledger", "prune", "--retention", "-1s", "--db", db}, "--retention -1s: must not be negative"},
		{[]string{"bench", "--messages", "5"}, "--messages 5: want at least 1000"},
		{[]string{"bench", "--messages", "1000", "--per-msg-messages", "2000"}, "--per-msg-messages 2000: want 100 up to --messages"},
		{[]string{"demo", "--resend", "-1"}, "--resend -1: want 0 up to --events (500)"},
	}
	for _, tt := range tests {
		if got := usageMessage(t, tt.args...); got != tt.want {
			t.Errorf("%q:\n got %q\nwant %q", tt.args, got, tt.want)
		}
	}
}

// replay records effects for run's sink and sends nothing: of the webhook
// flags it takes --webhook alone. run takes the sending flags, outbox
// cancel the deleting ones.
func TestEachCommandTakesOnlyTheWebhookFlagsItUses(t *testing.T) {
	t.Parallel()
	sending := []string{"--webhook-secret", "--webhook-id-header", "--webhook-id-field", "--webhook-idempotent",
		"--webhook-retry-on", "--outbox-workers", "--outbox-max-attempts"}
	deleting := []string{"--webhook-delete-url", "--webhook-lookup-url", "--webhook-timeout"}
	tests := []struct {
		cmd        []string
		want, dont []string
	}{
		{[]string{"replay"}, []string{"--webhook", "--send-effects", "--no-effects"}, append(slices.Clone(sending), deleting...)},
		{[]string{"run"}, append(append([]string{"--webhook"}, sending...), deleting...), nil},
		{[]string{"outbox", "cancel"}, deleting, append([]string{"--webhook"}, sending...)},
	}
	parser, err := newParser(&cli{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		node := parser.Model.Node
		for _, name := range tt.cmd {
			node = kongx.FindCommand(node, name)
		}
		var flags []string
		for _, group := range node.AllFlags(true) {
			for _, f := range group {
				flags = append(flags, "--"+f.Name)
			}
		}
		for _, f := range tt.want {
			if !slices.Contains(flags, f) {
				t.Errorf("%s lacks %s", tt.cmd, f)
			}
		}
		for _, f := range tt.dont {
			if slices.Contains(flags, f) {
				t.Errorf("%s takes %s, which it would ignore", tt.cmd, f)
			}
		}
	}
	if _, err := parseArgs("replay", "--webhook-secret", "s"); !errors.As(err, new(*kong.ParseError)) {
		t.Fatalf("replay --webhook-secret: %v, want a parse error", err)
	}
}

// A path the ledger refuses is the usage error of --db, wherever it is
// opened.
func TestLedgerInvalidConfigIsUsage(t *testing.T) {
	t.Parallel()
	_, err := dbFlag{DB: "a?b.db"}.openExisting()
	if !errors.As(err, new(usageError)) || !errors.Is(err, ledger.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "--db ") {
		t.Fatalf("err = %v, want a usage error of --db wrapping ledger.ErrInvalidConfig", err)
	}
}
