package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/internal/kongx"
)

// The files of deploy/ pass flags and JETLEDGER_* variables to run; these
// tests put them through the CLI's own parser and checks (nothing is
// started), so a renamed flag or variable fails here, not on a host.

const deployDir = "../../deploy"

// stopMargin is what run's drain bound leaves for the rest of a stop: the
// embedded server's shutdown and closing the ledger.
const stopMargin = 10 * time.Second

// unit is a systemd unit file: each section's keys and their values in order.
type unit map[string]map[string][]string

// readUnit parses a unit file: sections, Key=Value lines, comments and
// backslash continuations.
func readUnit(tb testing.TB, path string) unit {
	tb.Helper()
	lines := configLines(tb, path, "#;")
	u := unit{}
	section := ""
	for _, l := range lines {
		if strings.HasPrefix(l, "[") && strings.HasSuffix(l, "]") {
			section = strings.Trim(l, "[]")
			u[section] = map[string][]string{}
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok || section == "" {
			tb.Fatalf("%s: %q is no Key=Value in a section", path, l)
		}
		k = strings.TrimSpace(k)
		u[section][k] = append(u[section][k], strings.TrimSpace(v))
	}
	return u
}

// one is the single value of a key that must be set once.
func (u unit) one(tb testing.TB, section, key string) string {
	tb.Helper()
	vs := u[section][key]
	if len(vs) != 1 {
		tb.Fatalf("jetledger.service: [%s] %s is set %d times, want once", section, key, len(vs))
	}
	return vs[0]
}

// configLines is the file's lines, continuations joined, without blank lines
// and lines starting with one of the comment characters.
func configLines(tb testing.TB, path, comment string) []string {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var lines []string
	cont := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.ContainsRune(comment, rune(l[0])) {
			continue // a comment inside a continuation is skipped too
		}
		if s, ok := strings.CutSuffix(l, `\`); ok {
			cont += s + " "
			continue
		}
		lines = append(lines, cont+l)
		cont = ""
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	if cont != "" {
		tb.Fatalf("%s: ends in a continuation", path)
	}
	return lines
}

// execWords splits an ExecStart= value into its words. Specifiers (%) and
// variables ($) are refused: what they become on a host is not known here.
func execWords(tb testing.TB, v string) []string {
	tb.Helper()
	v = strings.TrimLeft(v, "@-:+!")
	if strings.ContainsAny(v, "%$") {
		tb.Fatalf("ExecStart=%s: uses %% or $, which this test cannot check; write the values out", v)
	}
	var words []string
	for v = strings.TrimSpace(v); v != ""; v = strings.TrimSpace(v) {
		if q := v[0]; q == '"' || q == '\'' {
			end := strings.IndexByte(v[1:], q)
			if end < 0 {
				tb.Fatalf("ExecStart: unterminated quote in %s", v)
			}
			words, v = append(words, v[1:end+1]), v[end+2:]
			continue
		}
		w, rest, _ := strings.Cut(v, " ")
		words, v = append(words, w), rest
	}
	return words
}

// envVar is one variable of an environment file, or of ENV in a Containerfile.
type envVar struct {
	name, value string
	commented   bool // an example, commented out
	line        int
}

var (
	envLine          = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)=(.*)$`)
	commentedEnvLine = regexp.MustCompile(`^[#;]\s*(JETLEDGER_[A-Za-z0-9_]*)=(.*)$`)
	operatorCommand  = regexp.MustCompile(`(?m)^#\s+sudo -u \S+ jetledger (.+)$`)
)

// readEnvFile parses an EnvironmentFile in the subset deploy/ uses: one
// KEY=value a line, optionally quoted, and comments. Commented-out
// JETLEDGER_* lines are examples, checked as well.
func readEnvFile(tb testing.TB, path string) []envVar {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var vars []envVar
	for i, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if m := commentedEnvLine.FindStringSubmatch(l); m != nil {
			vars = append(vars, envVar{name: m[1], value: unquote(m[2]), commented: true, line: i + 1})
			continue
		}
		if l == "" || l[0] == '#' || l[0] == ';' {
			continue
		}
		m := envLine.FindStringSubmatch(l)
		if m == nil || strings.HasSuffix(l, `\`) {
			tb.Fatalf("%s:%d: %q is not KEY=value", path, i+1, l)
		}
		vars = append(vars, envVar{name: m[1], value: unquote(m[2]), line: i + 1})
	}
	return vars
}

func unquote(v string) string {
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		return v[1 : len(v)-1]
	}
	return v
}

// runEnvironment is every variable `jetledger run` reads: its flags' and
// the global flags'.
func runEnvironment(tb testing.TB) []string {
	tb.Helper()
	parser, err := newParser(&cli{}, io.Discard, io.Discard)
	if err != nil {
		tb.Fatal(err)
	}
	for _, n := range parser.Model.Node.Children {
		if n.Name != "run" {
			continue
		}
		var names []string
		for _, group := range n.AllFlags(false) {
			for _, f := range group {
				names = append(names, f.Envs...)
			}
		}
		return names
	}
	tb.Fatal("no run command")
	return nil
}

// clearEnvironment unsets the JETLEDGER_* variables of the test's own
// environment for the test, so that only the deploy files' count.
func clearEnvironment(t *testing.T) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "JETLEDGER_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
}

// parseRun parses args, which must select run, with vars in the
// environment as systemd or the container runtime would set them, and
// returns run's flags. Nothing is started.
func parseRun(t *testing.T, args []string, vars ...envVar) (*runCmd, error) {
	t.Helper()
	for _, v := range vars {
		t.Setenv(v.name, v.value)
	}
	defer func() {
		for _, v := range vars {
			os.Unsetenv(v.name)
		}
	}()
	root, err := parseArgs(args...)
	if err != nil {
		return nil, err
	}
	if len(args) == 0 || args[0] != "run" {
		return nil, fmt.Errorf("%q is not a run command line", args)
	}
	return &root.Run, nil
}

// drainBound is the longest run can take to stop after SIGTERM with these
// flags: it commits the batch in hand within the plan's AckWait while an
// outbox send in flight takes up to the webhook timeout and then its
// write-back up to the claim lease. The send's part counts even without
// --webhook: uncommenting one must not need a longer timeout.
func drainBound(r *runCmd) (time.Duration, error) {
	plan, err := r.Plan.plan()
	if err != nil {
		return 0, err
	}
	return max(plan.AckWait(), r.Delete.Timeout+plan.ClaimLease(r.Delete.Timeout)), nil
}

// parseTimespan reads a systemd time span as deploy/ writes it: seconds, or
// a number with s, min, h or ms.
func parseTimespan(tb testing.TB, s string) time.Duration {
	tb.Helper()
	if n, err := strconv.Atoi(s); err == nil {
		return time.Duration(n) * time.Second
	}
	d, err := time.ParseDuration(strings.ReplaceAll(strings.ReplaceAll(s, "min", "m"), " ", ""))
	if err != nil {
		tb.Fatalf("time span %q: %v", s, err)
	}
	return d
}

// under reports whether path is dir or inside it.
func under(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && filepath.IsAbs(path) && rel != ".." && !strings.HasPrefix(rel, "../")
}

// checkEnvNames fails for each JETLEDGER_* variable run does not read.
func checkEnvNames(t *testing.T, file string, vars []envVar) {
	t.Helper()
	known := runEnvironment(t)
	for _, v := range vars {
		if strings.HasPrefix(v.name, "JETLEDGER_") && !slices.Contains(known, v.name) {
			where := file
			if v.line > 0 {
				where = fmt.Sprintf("%s:%d", file, v.line)
			}
			t.Errorf("%s: %s is no variable of jetledger run%s", where, v.name, kongx.Suggest(v.name, known))
		}
	}
}

// The unit's ExecStart with the sample environment file is a run the CLI
// accepts: every flag and variable is one it knows, every value parses and
// passes run's checks, the ledger and the store are in the StateDirectory,
// and TimeoutStopSec outlasts the drain, for each commented-out example too.
func TestDeploySystemdUnit(t *testing.T) {
	clearEnvironment(t)
	u := readUnit(t, filepath.Join(deployDir, "jetledger.service"))
	envPath := filepath.Join(deployDir, "jetledger.env")
	vars := readEnvFile(t, envPath)
	checkEnvNames(t, "jetledger.env", vars)
	var active []envVar
	for _, v := range vars {
		if !v.commented {
			active = append(active, v)
		}
	}

	if got := u.one(t, "Service", "EnvironmentFile"); got != "-/etc/jetledger/"+filepath.Base(envPath) {
		t.Errorf("EnvironmentFile=%s, want the sample's place, -/etc/jetledger/%s", got, filepath.Base(envPath))
	}
	words := execWords(t, u.one(t, "Service", "ExecStart"))
	if len(words) < 2 || !filepath.IsAbs(words[0]) {
		t.Fatalf("ExecStart=%q: want an absolute path to jetledger and its arguments", words)
	}
	r, err := parseRun(t, words[1:], active...)
	if err != nil {
		t.Fatalf("ExecStart %q with jetledger.env: %v", words[1:], err)
	}
	// The checks run makes before it starts anything.
	if _, err := r.prepare(); err != nil {
		t.Errorf("ExecStart %q with jetledger.env: %v", words[1:], err)
	}
	state := "/var/lib/" + u.one(t, "Service", "StateDirectory")
	store := cmp.Or(r.Embedded.StoreDir, r.DB+".nats")
	for name, p := range map[string]string{"--db": r.DB, "--store-dir": store} {
		if !under(p, state) {
			t.Errorf("%s %s: not in the StateDirectory %s, the only place ProtectSystem=strict lets it write", name, p, state)
		}
	}
	// The commands the unit's comments tell an operator to run.
	text, err := os.ReadFile(filepath.Join(deployDir, "jetledger.service"))
	if err != nil {
		t.Fatal(err)
	}
	operated := 0
	for _, m := range operatorCommand.FindAllStringSubmatch(string(text), -1) {
		operated++
		if _, err := parseArgs(strings.Fields(m[1])...); err != nil {
			t.Errorf("comment: jetledger %s: %v", m[1], err)
		}
	}
	if operated == 0 {
		t.Error("the unit's comments show no command to operate it as its user")
	}
	if got := u.one(t, "Service", "KillSignal"); got != "SIGTERM" {
		t.Errorf("KillSignal=%s: run drains on SIGTERM", got)
	}
	stop := parseTimespan(t, u.one(t, "Service", "TimeoutStopSec"))
	checkStop := func(what string, r *runCmd) {
		t.Helper()
		d, err := drainBound(r)
		if err != nil {
			t.Errorf("%s: %v", what, err)
		} else if d+stopMargin > stop {
			t.Errorf("%s: run may take %s to drain (+%s to stop the server), over TimeoutStopSec=%s", what, d, stopMargin, stop)
		}
	}
	checkStop("jetledger.env", r)
	for _, v := range vars {
		if !v.commented {
			continue
		}
		if v.name == "JETLEDGER_CONFIG" {
			continue // --config reads its file while parsing: only the name is checked
		}
		ex, err := parseRun(t, words[1:], append(slices.Clone(active), v)...)
		if err != nil {
			t.Errorf("jetledger.env:%d: %s=%s: %v", v.line, v.name, v.value, err)
			continue
		}
		checkStop(fmt.Sprintf("jetledger.env:%d %s=%s", v.line, v.name, v.value), ex)
	}
}

// The user the unit runs as is the one deploy/jetledger.sysusers creates.
func TestDeploySysusers(t *testing.T) {
	t.Parallel()
	u := readUnit(t, filepath.Join(deployDir, "jetledger.service"))
	user := u.one(t, "Service", "User")
	path := filepath.Join(deployDir, "jetledger.sysusers")
	lines := configLines(t, path, "#")
	if len(lines) != 1 || !slices.Equal(strings.Fields(lines[0])[:2], []string{"u", user}) {
		t.Fatalf("%s: %q, want one line u %s ...", path, lines, user)
	}
	tool, err := exec.LookPath("systemd-sysusers")
	if err != nil {
		t.Skip("systemd-sysusers is not installed")
	}
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(path)
	if out, err := exec.Command(tool, "--root="+root, abs).CombinedOutput(); err != nil {
		t.Fatalf("systemd-sysusers: %v\n%s", err, out)
	}
	passwd, err := os.ReadFile(filepath.Join(root, "etc", "passwd"))
	if err != nil || !strings.HasPrefix(string(passwd), user+":") {
		t.Fatalf("systemd-sysusers made /etc/passwd %q (%v), want user %s", passwd, err, user)
	}
}

// systemd's own reading of the unit: any complaint about it fails.
func TestDeploySystemdVerify(t *testing.T) {
	t.Parallel()
	tool, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	text, err := os.ReadFile(filepath.Join(deployDir, "jetledger.service"))
	if err != nil {
		t.Fatal(err)
	}
	// verify insists that ExecStart's program exists: put one that does
	// (this test's binary) in place of the installed path.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	u := readUnit(t, filepath.Join(deployDir, "jetledger.service"))
	bin := execWords(t, u.one(t, "Service", "ExecStart"))[0]
	path := filepath.Join(t.TempDir(), "jetledger.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(text), "ExecStart="+bin, "ExecStart="+self)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(tool, "verify", path).CombinedOutput()
	if err != nil || strings.Contains(string(out), filepath.Base(path)) {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// containerStage is what the test reads of a Containerfile: per stage, its
// base and instructions.
type containerStage struct {
	from  string
	instr [][2]string // instruction (upper case), arguments
}

func readContainerfile(tb testing.TB, path string) []containerStage {
	tb.Helper()
	var stages []containerStage
	for _, l := range configLines(tb, path, "#") {
		cmd, args, _ := strings.Cut(l, " ")
		cmd, args = strings.ToUpper(cmd), strings.TrimSpace(args)
		if cmd == "FROM" {
			var image string
			for _, f := range strings.Fields(args) {
				if !strings.HasPrefix(f, "--") {
					image = f
					break
				}
			}
			stages = append(stages, containerStage{from: image})
			continue
		}
		if len(stages) == 0 {
			if cmd == "ARG" {
				continue
			}
			tb.Fatalf("%s: %s before FROM", path, cmd)
		}
		s := &stages[len(stages)-1]
		s.instr = append(s.instr, [2]string{cmd, args})
	}
	if len(stages) == 0 {
		tb.Fatalf("%s: no FROM", path)
	}
	return stages
}

func (s containerStage) all(cmd string) []string {
	var out []string
	for _, in := range s.instr {
		if in[0] == cmd {
			out = append(out, in[1])
		}
	}
	return out
}

// jsonArgs reads the exec form of ENTRYPOINT and CMD; the shell form would
// run the binary under a shell scratch does not have.
func jsonArgs(tb testing.TB, what string, vs []string) []string {
	tb.Helper()
	if len(vs) != 1 {
		tb.Fatalf("Containerfile: %s is given %d times in the final stage, want once", what, len(vs))
	}
	var args []string
	if err := json.Unmarshal([]byte(vs[0]), &args); err != nil {
		tb.Fatalf("Containerfile: %s %s: want the exec form, a JSON array: %v", what, vs[0], err)
	}
	return args
}

// isLoopback reports whether a listen address's host is this host only.
func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// The image runs run as a non-root user with flags and variables the CLI
// accepts, keeps its state on the volume, names no registry, and exposes
// exactly the ports it listens on beyond loopback.
func TestDeployContainerfile(t *testing.T) {
	clearEnvironment(t)
	path := filepath.Join(deployDir, "Containerfile")
	stages := readContainerfile(t, path)
	for _, s := range stages {
		// A registry host has a dot or a port in its first component.
		if first, _, found := strings.Cut(s.from, "/"); found && (strings.ContainsAny(first, ".:") || first == "localhost") {
			t.Errorf("FROM %s names a registry host", s.from)
		}
	}
	final := stages[len(stages)-1]
	if final.from != "scratch" {
		t.Errorf("final stage FROM %s, want scratch: the binary is static", final.from)
	}
	build := strings.Join(stages[0].all("RUN"), "\n")
	if !strings.Contains(build, "CGO_ENABLED=0") || !strings.Contains(build, "./cmd/jetledger") {
		t.Errorf("the build stage does not build ./cmd/jetledger with CGO_ENABLED=0:\n%s", build)
	}

	users := final.all("USER")
	if len(users) == 0 {
		t.Error("the final stage has no USER: it would run as root")
	}
	for _, u := range users {
		if name, _, _ := strings.Cut(u, ":"); name == "root" || name == "0" {
			t.Errorf("USER %s is root", u)
		}
	}
	var vars []envVar
	for _, e := range final.all("ENV") {
		for _, kv := range strings.Fields(e) {
			m := envLine.FindStringSubmatch(kv)
			if m == nil {
				t.Fatalf("ENV %s: want KEY=value pairs", e)
			}
			vars = append(vars, envVar{name: m[1], value: unquote(m[2])})
		}
	}
	checkEnvNames(t, "Containerfile", vars)
	if got := jsonArgs(t, "ENTRYPOINT", final.all("ENTRYPOINT")); !slices.Equal(got, []string{"/jetledger"}) {
		t.Errorf("ENTRYPOINT %q, want [\"/jetledger\"]", got)
	}
	args := jsonArgs(t, "CMD", final.all("CMD"))
	r, err := parseRun(t, args, vars...)
	if err != nil {
		t.Fatalf("CMD %q with its ENV: %v", args, err)
	}
	if _, err := r.prepare(); err != nil {
		t.Errorf("CMD %q with its ENV: %v", args, err)
	}

	var volumes []string
	for _, v := range final.all("VOLUME") {
		if err := json.Unmarshal([]byte(v), &volumes); err != nil {
			volumes = append(volumes, strings.Fields(v)...)
		}
	}
	store := cmp.Or(r.Embedded.StoreDir, r.DB+".nats")
	for name, p := range map[string]string{"--db": r.DB, "--store-dir": store} {
		if !slices.ContainsFunc(volumes, func(v string) bool { return under(p, v) }) {
			t.Errorf("%s %s: on no VOLUME %q, so it is lost with the container", name, p, volumes)
		}
	}

	// What run listens on beyond loopback must be exposed, and only that.
	want := map[string]bool{}
	listens := []string{r.Metrics}
	if r.NATS.URL == "" {
		listens = append(listens, r.Embedded.Listen) // the embedded server
	}
	for _, addr := range listens {
		if addr == "" {
			continue
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatalf("listen address %s: %v", addr, err)
		}
		if !isLoopback(host) {
			want[port] = true
		}
	}
	got := map[string]bool{}
	for _, e := range final.all("EXPOSE") {
		for _, p := range strings.Fields(e) {
			port, _, _ := strings.Cut(p, "/")
			got[port] = true
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("EXPOSE %v, but run listens beyond loopback on %v (--listen %s, --metrics %q)",
			slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)), r.Embedded.Listen, r.Metrics)
	}
}
