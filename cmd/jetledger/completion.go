package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/alecthomas/kong"
)

// The completion scripts ask the binary itself, through the hidden command
// __complete, for the candidates of the word under the cursor: commands,
// flags and the values of enumerations come from kong's model, so they
// never go stale. Where it has none (a file, say), the shell completes file
// names.

const bashCompletion = `# bash completion for jetledger; load it with
#   source <(jetledger completion bash)
# Bash looks a command up by its whole path first, then by its last part:
# both names cover ./jetledger, and the second any path ending in /jetledger.
_jetledger() {
	local cur=${COMP_WORDS[COMP_CWORD]} IFS=$'\n' candidates
	candidates=$("${COMP_WORDS[0]}" __complete -- "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null || :)
	[[ $cur == = ]] && cur= # --flag=<TAB>: bash splits the word at '='
	COMPREPLY=($(compgen -W "$candidates" -- "$cur" || :))
}
complete -o default -F _jetledger jetledger ./jetledger
`

const zshCompletion = `#compdef jetledger
# zsh completion for jetledger; load it with
#   source <(jetledger completion zsh)
# (after compinit), or save it as _jetledger in a directory of $fpath.
_jetledger() {
	local -a candidates
	candidates=("${(@f)$("${words[1]}" __complete -- "${(@)words[2,CURRENT]}" 2>/dev/null)}")
	if [[ -n ${candidates[1]} ]]; then
		compadd -a candidates
	else
		_files
	fi
}
if [[ "${funcstack[1]}" == _jetledger ]]; then
	_jetledger "$@"
else
	compdef _jetledger jetledger
fi
`

const fishCompletion = `# fish completion for jetledger; load it with
#   jetledger completion fish | source
function __jetledger_complete
	set -l words (commandline -opc)
	set -l candidates ($words[1] __complete -- $words[2..-1] (commandline -ct) 2>/dev/null)
	if test (count $candidates) -gt 0
		printf '%s\n' $candidates
	else
		__fish_complete_path (commandline -ct)
	end
end
complete -c jetledger -f -a '(__jetledger_complete)'
`

var completionScripts = map[string]string{"bash": bashCompletion, "zsh": zshCompletion, "fish": fishCompletion}

// completionCmd is `jetledger completion SHELL`.
type completionCmd struct {
	Shell string `arg:"" enum:"bash,zsh,fish" help:"bash, zsh or fish"`
}

func (c *completionCmd) Run(inv *invocation) error {
	fmt.Fprint(inv.stdout, completionScripts[c.Shell])
	return nil
}

// completeCmd is `jetledger __complete -- WORD...`: the candidates for the
// last word, given the ones before it, one a line.
type completeCmd struct {
	Words []string `arg:"" optional:"" passthrough:"" help:"the words after the program name, the last one under the cursor"`
}

func (c *completeCmd) Run(kctx *kong.Context, inv *invocation) error {
	words := c.Words
	if len(words) > 0 && words[0] == "--" {
		words = words[1:]
	}
	for _, s := range completions(kctx.Model.Node, words) {
		fmt.Fprintln(inv.stdout, s)
	}
	return nil
}

// completions are the candidates for the last of words, after walking the
// others down root's commands.
func completions(root *kong.Node, words []string) []string {
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
		out = valuesOf(at.flag.Value) // none: the shell completes file names
	case strings.HasPrefix(cur, "-") && strings.Contains(cur, "="):
		name, _, _ := strings.Cut(cur, "=")
		if f := findFlag(at.node, name); f != nil {
			for _, v := range valuesOf(f.Value) {
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
		out = commandNames(at.node)
		if at.args < len(at.node.Positional) {
			out = append(out, valuesOf(at.node.Positional[at.args])...)
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
			if f := findFlag(at.node, w); f != nil && !f.IsBool() && !strings.Contains(w, "=") {
				at.flag = f
			}
		case at.node == root && w == "help":
		default:
			if child := findCommand(at.node, w); child != nil {
				at = place{node: child}
			} else {
				at.args++
			}
		}
	}
	return at
}

// valuesOf are the values a flag or argument takes when they are a fixed
// set: kong's enum, or the values tag of a flag checked by its command.
func valuesOf(v *kong.Value) []string {
	if v.Enum != "" {
		return splitList(v.Enum)
	}
	return splitList(v.Tag.Get("values"))
}

// findFlag is the flag of node or a parent that word (--name or
// --name=value) names.
func findFlag(node *kong.Node, word string) *kong.Flag {
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
