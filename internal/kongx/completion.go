package kongx

import (
	"fmt"
	"slices"
	"strings"

	"github.com/alecthomas/kong"
)

// The completion scripts ask the binary itself, through a hidden command
// __complete, for the candidates of the word under the cursor: commands,
// flags and the values of enumerations come from kong's model, so they
// never go stale. Where it has none (a file, say), the shell completes file
// names. PROG stands for the program's name.

const bashCompletion = `# bash completion for PROG; load it with
#   source <(PROG completion bash)
# Bash looks a command up by its whole path first, then by its last part:
# both names cover ./PROG, and the second any path ending in /PROG.
_PROG() {
	local cur=${COMP_WORDS[COMP_CWORD]} IFS=$'\n' candidates
	candidates=$("${COMP_WORDS[0]}" __complete -- "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null || :)
	[[ $cur == = ]] && cur= # --flag=<TAB>: bash splits the word at '='
	COMPREPLY=($(compgen -W "$candidates" -- "$cur" || :))
}
complete -o default -F _PROG PROG ./PROG
`

const zshCompletion = `#compdef PROG
# zsh completion for PROG; load it with
#   source <(PROG completion zsh)
# (after compinit), or save it as _PROG in a directory of $fpath.
_PROG() {
	local -a candidates
	candidates=("${(@f)$("${words[1]}" __complete -- "${(@)words[2,CURRENT]}" 2>/dev/null)}")
	if [[ -n ${candidates[1]} ]]; then
		compadd -a candidates
	else
		_files
	fi
}
if [[ "${funcstack[1]}" == _PROG ]]; then
	_PROG "$@"
else
	compdef _PROG PROG
fi
`

const fishCompletion = `# fish completion for PROG; load it with
#   PROG completion fish | source
function __PROG_complete
	set -l words (commandline -opc)
	set -l candidates ($words[1] __complete -- $words[2..-1] (commandline -ct) 2>/dev/null)
	if test (count $candidates) -gt 0
		printf '%s\n' $candidates
	else
		__fish_complete_path (commandline -ct)
	end
end
complete -c PROG -f -a '(__PROG_complete)'
`

var completionScripts = map[string]string{"bash": bashCompletion, "zsh": zshCompletion, "fish": fishCompletion}

// CompletionScript is the completion script of program for shell (bash,
// zsh or fish), or "" for another shell. The script runs `program
// __complete -- WORD...` (a CompleteCmd) for the candidates; program is a
// name the shell can call it by, and a valid shell function name.
func CompletionScript(shell, program string) string {
	return strings.ReplaceAll(completionScripts[shell], "PROG", program)
}

// CompletionCmd is `PROGRAM completion SHELL`: it prints CompletionScript
// for the program kong is named after. Give it a help tag:
//
//	Completion kongx.CompletionCmd `cmd:"" help:"print a shell completion script: bash, zsh or fish"`
type CompletionCmd struct {
	Shell string `arg:"" enum:"bash,zsh,fish" help:"bash, zsh or fish"`
}

// Run prints the script on kong's standard output.
func (c *CompletionCmd) Run(kctx *kong.Context) error {
	_, err := fmt.Fprint(kctx.Stdout, CompletionScript(c.Shell, kctx.Model.Name))
	return err
}

// CompleteCmd is `PROGRAM __complete -- WORD...`: the candidates for the
// last word, given the ones before it, one a line. Mount it hidden, as
// __complete, where the scripts call it:
//
//	Complete kongx.CompleteCmd `cmd:"" name:"__complete" hidden:"" help:"complete a command line (used by the completion scripts)"`
type CompleteCmd struct {
	Words []string `arg:"" optional:"" passthrough:"" help:"the words after the program name, the last one under the cursor"`
}

// Run prints Complete's candidates on kong's standard output.
func (c *CompleteCmd) Run(kctx *kong.Context) error {
	words := c.Words
	if len(words) > 0 && words[0] == "--" {
		words = words[1:]
	}
	for _, s := range Complete(kctx.Model.Node, words) {
		if _, err := fmt.Fprintln(kctx.Stdout, s); err != nil {
			return err
		}
	}
	return nil
}

// Complete is the sorted candidates for the last of words, after walking
// the others down root's commands: subcommands, flags, or the values of an
// enumeration (ValuesOf). None means a free value, for the shell to
// complete as a file name.
func Complete(root *kong.Node, words []string) []string {
	if len(words) == 0 {
		words = []string{""}
	}
	at := walk(root, words[:len(words)-1])
	cur := words[len(words)-1]
	if at.flag != nil && cur == "=" {
		cur = "" // bash's --flag=<TAB>
	}
	var out []string
	switch {
	case at.flag != nil:
		out = ValuesOf(at.flag.Value) // none: the shell completes file names
	case strings.HasPrefix(cur, "-") && strings.Contains(cur, "="):
		name, _, _ := strings.Cut(cur, "=")
		if f := FindFlag(at.node, name); f != nil {
			for _, v := range ValuesOf(f.Value) {
				out = append(out, name+"="+v)
			}
		}
	case strings.HasPrefix(cur, "-"):
		for _, group := range at.node.AllFlags(true) {
			for _, f := range group {
				out = append(out, "--"+f.Name)
			}
		}
	default:
		out = CommandNames(at.node)
		if at.args < len(at.node.Positional) {
			out = append(out, ValuesOf(at.node.Positional[at.args])...)
		}
	}
	out = slices.DeleteFunc(out, func(s string) bool { return !strings.HasPrefix(s, cur) })
	slices.Sort(out)
	return out
}

// place is where the words of a command line have led: the command, the
// flag whose value comes next if any, and the positional arguments given.
type place struct {
	node *kong.Node
	flag *kong.Flag
	args int
}

// walk follows words down root's commands, past flags and their values.
// The arguments of `help` are commands again.
func walk(root *kong.Node, words []string) place {
	at := place{node: root}
	for _, w := range words {
		switch {
		case at.flag != nil:
			if w != "=" { // bash splits --flag=value at '='
				at.flag = nil
			}
		case strings.HasPrefix(w, "-"):
			if f := FindFlag(at.node, w); f != nil && !f.IsBool() && !strings.Contains(w, "=") {
				at.flag = f
			}
		case at.node == root && w == "help":
		default:
			if child := FindCommand(at.node, w); child != nil {
				at = place{node: child}
			} else {
				at.args++
			}
		}
	}
	return at
}

// ValuesOf are the values a flag or argument takes when they are a fixed
// set: kong's enum, or else a values tag (values:"a,b") of a flag its
// command checks itself.
func ValuesOf(v *kong.Value) []string {
	if v.Enum != "" {
		return SplitList(v.Enum)
	}
	return SplitList(v.Tag.Get("values"))
}

// FindFlag is the flag of node or a parent that word (--name, --name=value
// or -x) names, or nil.
func FindFlag(node *kong.Node, word string) *kong.Flag {
	name, _, _ := strings.Cut(strings.TrimLeft(word, "-"), "=")
	for _, group := range node.AllFlags(false) {
		for _, f := range group {
			if f.Name == name || (len(word) == 2 && f.Short != 0 && string(f.Short) == name) {
				return f
			}
		}
	}
	return nil
}

// SplitList splits a comma-separated list (a flag value, an enum),
// dropping empty items.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
