package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/alecthomas/kong"
)

// The CLI reference, docs/cli.md, is generated from the kong model, the one
// source of the flags' names, types, defaults, variables and help; a golden
// test (TestCLIReferenceIsGenerated) fails when the file drifts.

// writeCLIReference writes the Markdown reference of every visible command
// of app, subcommands included, and of each one's flags.
func writeCLIReference(w io.Writer, app *kong.Application) error {
	var b strings.Builder
	b.WriteString("# jetledger command-line reference\n\n")
	b.WriteString("<!-- Generated from the kong model by cmd/jetledger; do not edit.\n")
	b.WriteString("     Regenerate: go test ./cmd/jetledger -run TestCLIReferenceIsGenerated -update -->\n\n")
	b.WriteString(strings.TrimSpace(app.Help) + "\n\n")
	writeFlagTable(&b, app.Flags)
	for _, n := range app.Children {
		writeCommandReference(&b, n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeCommandReference writes node n's section, then its subcommands'.
func writeCommandReference(b *strings.Builder, n *kong.Node) {
	if n.Hidden || n.Type != kong.CommandNode {
		return
	}
	fmt.Fprintf(b, "## %s\n\n", n.FullPath())
	if n.Help != "" {
		b.WriteString(strings.TrimSpace(n.Help) + "\n\n")
	}
	if d := strings.TrimSpace(n.Detail); d != "" && d != strings.TrimSpace(n.Help) {
		b.WriteString("```text\n" + d + "\n```\n\n")
	}
	for _, p := range n.Positional {
		fmt.Fprintf(b, "- argument `%s` (%s)%s: %s\n", p.Name, p.Target.Type(), required(p.Required), mdEscape(p.Help))
	}
	if len(n.Positional) > 0 {
		b.WriteString("\n")
	}
	writeFlagTable(b, n.Flags)
	for _, c := range n.Children {
		writeCommandReference(b, c)
	}
}

// writeFlagTable writes a table of the visible flags: name, type, default,
// environment variable, help.
func writeFlagTable(b *strings.Builder, flags []*kong.Flag) {
	var rows []string
	for _, f := range flags {
		if f.Hidden {
			continue
		}
		def := ""
		if f.HasDefault && f.Default != "" {
			def = "`" + f.Default + "`"
		}
		env := ""
		if len(f.Envs) > 0 {
			env = "`" + strings.Join(f.Envs, "`, `") + "`"
		}
		rows = append(rows, fmt.Sprintf("| `--%s` | %s | %s | %s | %s |", f.Name, flagType(f), def, env, mdEscape(f.Help)))
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("| Flag | Type | Default | Environment | Help |\n|---|---|---|---|---|\n")
	b.WriteString(strings.Join(rows, "\n") + "\n\n")
}

// flagType names what a flag takes: its values when it has a set, else its
// Go type (time.Duration, string, bool).
func flagType(f *kong.Flag) string {
	switch {
	case f.Enum != "":
		return "one of " + strings.ReplaceAll(f.Enum, ",", ", ")
	case f.IsBool():
		return "bool"
	}
	return strings.TrimPrefix(f.Target.Type().String(), "main.")
}

func required(r bool) string {
	if r {
		return ", required"
	}
	return ""
}

// mdEscape keeps help text on one table row.
func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
