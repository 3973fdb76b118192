package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// onPath returns an environment whose PATH finds the binary under test as
// `jetledger`, as a user who installed it has it.
func onPath(tb testing.TB) []string {
	env, _ := onPathIn(tb)
	return env
}

// onPathIn is onPath, and the directory that holds the binary.
func onPathIn(tb testing.TB) (env []string, dir string) {
	tb.Helper()
	dir = tb.TempDir()
	if err := os.Symlink(binPath, filepath.Join(dir, "jetledger")); err != nil {
		tb.Fatal(err)
	}
	return []string{"PATH=" + dir + string(os.PathListSeparator) + os.Getenv("PATH")}, dir
}

// shell runs script in the shell sh with env and returns its output.
func shell(tb testing.TB, sh string, env []string, script string) string {
	tb.Helper()
	if _, err := exec.LookPath(sh); err != nil {
		tb.Skipf("%s is not installed", sh)
	}
	p := startBinary(tb, sh, env, "-c", script)
	if code := p.wait(60 * time.Second); code != 0 {
		tb.Fatalf("%s exit %d:\n%s", sh, code, p.output())
	}
	return p.output()
}

// The bash completion, sourced in a real bash: COMPREPLY for
// `jetledger ru<TAB>` and `jetledger run --d<TAB>`.
func TestBashCompletion(t *testing.T) {
	t.Parallel()
	out := shell(t, "bash", onPath(t), `set -e
source <(jetledger completion bash)
complete -p jetledger ./jetledger
COMP_WORDS=(jetledger ru); COMP_CWORD=1; _jetledger
printf 'reply %s\n' "${COMPREPLY[@]}"
echo ---
COMP_WORDS=(jetledger run --d); COMP_CWORD=2; _jetledger
printf 'reply %s\n' "${COMPREPLY[@]}"
echo ---
COMP_WORDS=(jetledger outbox cancel ID --db ''); COMP_CWORD=5; _jetledger
printf 'reply %s\n' "${COMPREPLY[@]}"
`)
	parts := strings.Split(out, "---\n")
	if len(parts) != 3 || !strings.Contains(parts[0], "complete -o default -F _jetledger jetledger\n") ||
		!strings.Contains(parts[0], "complete -o default -F _jetledger ./jetledger\n") {
		t.Fatalf("output:\n%s", out)
	}
	replies := func(s string) (r []string) {
		for _, line := range strings.Split(s, "\n") {
			if v, ok := strings.CutPrefix(line, "reply "); ok && v != "" {
				r = append(r, v)
			}
		}
		return r
	}
	if got := replies(parts[0]); !slices.Equal(got, []string{"run"}) {
		t.Fatalf("jetledger ru<TAB>: %q, want [run]", got)
	}
	got := replies(parts[1])
	for _, want := range []string{"--db", "--deadline", "--durable", "--duplicate-window", "--db-max-size"} {
		if !slices.Contains(got, want) {
			t.Fatalf("jetledger run --d<TAB>: %q lacks %s", got, want)
		}
	}
	for _, g := range got {
		if !strings.HasPrefix(g, "--d") {
			t.Fatalf("jetledger run --d<TAB> offers %q", g)
		}
	}
	if got := replies(parts[2]); len(got) != 0 {
		t.Fatalf("a flag's value offers %q; want nothing, so bash completes file names", got)
	}
}

// Bash finds the completion by the command word as typed: the README's
// ./jetledger and a path ending in /jetledger complete as jetledger does,
// in an interactive bash driven through a pseudo-terminal (zsh's zpty).
func TestBashCompletesByPath(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	env, dir := onPathIn(t)
	out := shell(t, "zsh", append(env, "HOME="+t.TempDir()), typeAndTab("bash --norc -i",
		`PS1=""; bind "set enable-bracketed-paste off"; source <(jetledger completion bash); cd `+dir,
		"./jetledger ru", dir+"/jetledger outbox res", "jetledger run --log-level=w"))
	want := []string{"./jetledger run", dir + "/jetledger outbox resolve", "jetledger run --log-level=warn"}
	if got := completedLines(out); !slices.Equal(got, want) {
		t.Fatalf("bash completed %q, want %q\n%s", got, want, out)
	}
}

// zsh and fish complete with their scripts: zsh in an interactive shell
// driven through a pseudo-terminal, fish with complete -C (which runs a
// completion as the TAB key does).
func TestZshAndFishCompletion(t *testing.T) {
	t.Parallel()
	env := onPath(t)
	t.Run("zsh", func(t *testing.T) {
		out := shell(t, "zsh", append(env, "HOME="+t.TempDir()), typeAndTab("zsh -f -i",
			`PS1=""; unset zle_bracketed_paste; autoload -U compinit; compinit -u; source <(jetledger completion zsh)`,
			"jetledger ru", "jetledger run --dea", "jetledger completion z"))
		if lines := completedLines(out); !slices.Equal(lines, []string{"jetledger run", "jetledger run --deadline", "jetledger completion zsh"}) {
			t.Fatalf("zsh completed %q\n%s", lines, out)
		}
	})
	t.Run("fish", func(t *testing.T) {
		out := shell(t, "fish", append(env, "HOME="+t.TempDir()), `jetledger completion fish | source
complete -C'jetledger ru'
echo ---
complete -C'jetledger outbox re'`)
		before, after, ok := strings.Cut(out, "---\n")
		if !ok || strings.TrimSpace(before) != "run" || !slices.Equal(strings.Fields(after), []string{"resolve", "retry", "review"}) {
			t.Fatalf("fish:\n%s", out)
		}
	})
}

// typeAndTab is a zsh script that starts the interactive shell sh through
// zpty, as a terminal would, runs setup in it, then types each line and TAB
// and prints the completed line as BUF:<line>.
func typeAndTab(sh, setup string, lines ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "zmodload zsh/zpty\nzpty z %q\nzpty -w z %q\nzpty -r -m z out '*READY*'\n", sh, setup+`; echo REA""DY`)
	for i, line := range lines {
		fmt.Fprintf(&b, "zpty -n -w z $'%s\\t'\n", line)
		fmt.Fprintf(&b, "zpty -n -w z $'\\C-aecho BUF:\\C-e; echo DO\"\"NE%d\\n'\n", i)
		fmt.Fprintf(&b, "zpty -r -m z out '*DONE%d*'\nprint -r -- \"$out\"\n", i)
	}
	b.WriteString("zpty -d z\n")
	return b.String()
}

// completedLines are the lines typeAndTab printed.
func completedLines(out string) []string {
	var lines []string
	for _, line := range strings.Split(strings.ReplaceAll(out, "\r", ""), "\n") {
		if v, ok := strings.CutPrefix(line, "BUF:"); ok {
			lines = append(lines, strings.TrimSpace(v))
		}
	}
	return lines
}

// The UX points of issue 10, measured on the binary: --help printed once,
// an unknown flag one line with a suggestion and one saying where the help
// is, exit 2, `help CMD` the command's help, `version` and `--version` one
// line.
func TestCLIHelpErrorsVersion(t *testing.T) {
	t.Parallel()
	out, code := cli(t, "run", "--help")
	if code != 0 || strings.Count(out, "Usage: jetledger run") != 1 {
		t.Fatalf("run --help: exit %d\n%s", code, out)
	}
	if viaHelp, code := cli(t, "help", "run"); code != 0 || viaHelp != out {
		t.Fatalf("help run: exit %d, not run's help:\n%s", code, viaHelp)
	}
	if out, code := cli(t, "run", "--dbb", "x"); code != 2 || out != "jetledger run: unknown flag --dbb, did you mean \"--db\"?\nRun 'jetledger run --help' for usage.\n" {
		t.Fatalf("run --dbb x: exit %d\n%s", code, out)
	}
	version, code := cli(t, "version")
	if flagVersion, flagCode := cli(t, "--version"); code != 0 || flagCode != 0 || version != flagVersion ||
		!strings.HasPrefix(version, "jetledger ") || !strings.Contains(version, " go1.") || strings.Count(version, "\n") != 1 {
		t.Fatalf("version: exit %d %q; --version: exit %d %q", code, version, flagCode, flagVersion)
	}
}
