package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/alecthomas/kong"
)

// The completion scripts ask the binary itself, through the hidden command
// __complete, for the candidates of the word under the cursor: commands and
// flags come from kong's model, so they never go stale. Where it has none
// (a flag's value), the shell completes file names.

const bashCompletion = `# bash completion for jetledger; load it with
#   source <(jetledger completion bash)
_jetledger() {
	local cur=${COMP_WORDS[COMP_CWORD]} IFS=$'\n' candidates
	candidates=$("${COMP_WORDS[0]}" __complete -- "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null || :)
	COMPREPLY=($(compgen -W "$candidates" -- "$cur" || :))
}
complete -o default -F _jetledger jetledger
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
// others down root's commands (skipping flags and their values).
func completions(root *kong.Node, words []string) []string {
	if len(words) == 0 {
		words = []string{""}
	}
	node := root
	before, cur := words[:len(words)-1], words[len(words)-1]
	wantsValue := false
	for _, w := range before {
		switch {
		case wantsValue:
			wantsValue = false
		case strings.HasPrefix(w, "-"):
			f := findFlag(node, w)
			wantsValue = f != nil && !f.IsBool() && !strings.Contains(w, "=")
		default:
			if child := findCommand(node, w); child != nil {
				node = child
			}
		}
	}
	var out []string
	switch {
	case wantsValue:
		return nil // a flag's value: the shell completes file names
	case strings.HasPrefix(cur, "-"):
		for _, group := range node.AllFlags(true) {
			for _, f := range group {
				out = append(out, "--"+f.Name)
			}
		}
	default:
		out = commandNames(node)
	}
	out = slices.DeleteFunc(out, func(s string) bool { return !strings.HasPrefix(s, cur) })
	slices.Sort(out)
	return out
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
