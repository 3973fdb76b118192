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
func onPath(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Symlink(binPath, filepath.Join(dir, "jetledger")); err != nil {
		t.Fatal(err)
	}
	return []string{"PATH=" + dir + string(os.PathListSeparator) + os.Getenv("PATH")}
}

// shell runs script in the shell sh with env and returns its output.
func shell(t *testing.T, sh string, env []string, script string) string {
	t.Helper()
	if _, err := exec.LookPath(sh); err != nil {
		t.Skipf("%s is not installed", sh)
	}
	p := startBinary(t, sh, env, "-c", script)
	if code := p.wait(60 * time.Second); code != 0 {
		t.Fatalf("%s exit %d:\n%s", sh, code, p.output())
	}
	return p.output()
}

// The bash completion, sourced in a real bash: COMPREPLY for
// `jetledger ru<TAB>` and `jetledger run --d<TAB>`.
func TestBashCompletion(t *testing.T) {
	t.Parallel()
	out := shell(t, "bash", onPath(t), `set -e
source <(jetledger completion bash)
complete -p jetledger
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
	if len(parts) != 3 || !strings.Contains(parts[0], "complete -o default -F _jetledger jetledger") {
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

// zsh and fish complete with their scripts: zsh in an interactive shell
// driven through a pseudo-terminal, fish with complete -C (which runs a
// completion as the TAB key does).
func TestZshAndFishCompletion(t *testing.T) {
	t.Parallel()
	env := onPath(t)
	t.Run("zsh", func(t *testing.T) {
		out := shell(t, "zsh", append(env, "HOME="+t.TempDir()), zshCompletes("jetledger ru", "jetledger run --dea"))
		var lines []string
		for _, line := range strings.Split(strings.ReplaceAll(out, "\r", ""), "\n") {
			if v, ok := strings.CutPrefix(line, "BUF:"); ok {
				lines = append(lines, strings.TrimSpace(v))
			}
		}
		if !slices.Equal(lines, []string{"jetledger run", "jetledger run --deadline"}) {
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

// zshCompletes is a zsh script that types each line and TAB into an
// interactive zsh with the completion loaded (through zpty, as a terminal
// would), then prints the completed line as BUF:<line>.
func zshCompletes(lines ...string) string {
	var b strings.Builder
	b.WriteString(`zmodload zsh/zpty
zpty z "zsh -f -i"
zpty -w z 'PS1=""; unset zle_bracketed_paste; autoload -U compinit; compinit -u; source <(jetledger completion zsh); print READY'
zpty -r -m z out '*READY*'
`)
	for i, line := range lines {
		fmt.Fprintf(&b, "zpty -n -w z $'%s\\t'\n", line)
		fmt.Fprintf(&b, "zpty -n -w z $'\\C-aprint -r -- BUF:\\C-e; print -r -- DO\"\"NE%d\\n'\n", i)
		fmt.Fprintf(&b, "zpty -r -m z out '*DONE%d*'\nprint -r -- \"$out\"\n", i)
	}
	b.WriteString("zpty -d z\n")
	return b.String()
}

// The UX points of issue 10, measured on the binary: --help printed once,
// an unknown flag one line with a suggestion and exit 2, `help CMD` the
// command's help, `version` and `--version` one line.
func TestCLIHelpErrorsVersion(t *testing.T) {
	t.Parallel()
	out, code := cli(t, "run", "--help")
	if code != 0 || strings.Count(out, "Usage: jetledger run") != 1 {
		t.Fatalf("run --help: exit %d\n%s", code, out)
	}
	if viaHelp, code := cli(t, "help", "run"); code != 0 || viaHelp != out {
		t.Fatalf("help run: exit %d, not run's help:\n%s", code, viaHelp)
	}
	if out, code := cli(t, "run", "--dbb", "x"); code != 2 || out != "jetledger: error: unknown flag --dbb, did you mean \"--db\"?\n" {
		t.Fatalf("run --dbb x: exit %d\n%s", code, out)
	}
	version, code := cli(t, "version")
	if flagVersion, flagCode := cli(t, "--version"); code != 0 || flagCode != 0 || version != flagVersion ||
		!strings.HasPrefix(version, "jetledger ") || !strings.Contains(version, " go1.") || strings.Count(version, "\n") != 1 {
		t.Fatalf("version: exit %d %q; --version: exit %d %q", code, version, flagCode, flagVersion)
	}
}
