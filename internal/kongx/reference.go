package kongx

import (
	"fmt"
	"io"
	"strings"

	"github.com/alecthomas/kong"
)

// A command-line reference generated from the kong model, the one source
// of the flags' names, types, defaults, variables and help, cannot drift
// from --help; check it with a golden test that compares the file with
// what WriteReference makes.

// ReferenceConfig says where a generated reference comes from.
type ReferenceConfig struct {
	// Generator names what generates the file, as its header comment
	// says: "Generated from the kong model by Generator". Default: the
	// comment names none.
	Generator string
	// Regenerate is the command that regenerates the file, shown in the
	// header comment. Default: none shown.
	Regenerate string
}

// WriteReference writes the Markdown reference of app: its help and
// flags, then every visible command, subcommands included, with its help,
// arguments and flags (name, type, default, environment variable, help).
func WriteReference(w io.Writer, app *kong.Application, cfg ReferenceConfig) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s command-line reference\n\n", app.Name)
	b.WriteString("<!-- Generated from the kong model")
	if cfg.Generator != "" {
		b.WriteString(" by " + cfg.Generator)
	}
	b.WriteString("; do not edit.")
	if cfg.Regenerate != "" {
		b.WriteString("\n     Regenerate: " + cfg.Regenerate)
	}
	b.WriteString(" -->\n\n")
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
// Go type (time.Duration, string, bool), without the package name when
// the type is the program's own (package main).
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
