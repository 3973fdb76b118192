package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/alecthomas/kong"
)

// tomlConfig is the file of --config (JETLEDGER_CONFIG): TOML whose keys are
// flag names as written on the command line, without the dashes.
//
//	db = "/var/lib/jetledger/payments.db"   # every command that has --db
//	[run]                                   # run only, over the top level
//	deadline = "30s"
//	[outbox.cancel]                         # outbox cancel, over [outbox]
//	webhook-delete-url = "https://example.com/items/{external_id}"
//
// A table names a command, a table inside it a subcommand; the deeper table
// wins. A value is a string, number or boolean, or an array of them, which
// is joined with commas (subjects = ["a.>", "b.>"]). A key that is no flag
// of its command (for top-level keys: of any command) is an error, as is a
// table that is no command: a typo in a host's file must not be silent.
//
// The command line wins over the environment, and the environment over the
// file: kong gives the environment to a flag before resolvers run, so the
// file's resolver steps aside for a flag whose variable is set.
type tomlConfig struct {
	path   string
	values map[string]any
}

// configFlag is --config: the file is read before the flags are resolved,
// and every error about it names it.
type configFlag string

// BeforeResolve reads the file and adds it as a resolver.
func (configFlag) BeforeResolve(kctx *kong.Context, trace *kong.Path) error {
	path, _ := kctx.FlagValue(trace.Flag).(configFlag)
	if path == "" {
		return errors.New("--config is empty: give a file, or leave the flag out")
	}
	return loadConfig(kctx, kong.ExpandPath(string(path)))
}

// loadConfig reads the TOML file at path and adds it as a resolver.
func loadConfig(kctx *kong.Context, path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("config file %s: no such file", path)
	}
	if err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	defer f.Close()
	cfg := &tomlConfig{path: path}
	if _, err := toml.NewDecoder(f).Decode(&cfg.values); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	kctx.AddResolver(cfg)
	return nil
}

// notInFile are the flags a config file cannot set: they act at once
// (--help, --version) or name the file itself (--config).
var notInFile = []string{"help", "config", "version"}

// Validate checks every key of the file against the application's commands
// and flags.
func (c *tomlConfig) Validate(app *kong.Application) error {
	if err := checkTable(c.values, app.Node, ""); err != nil {
		return fmt.Errorf("config file %s: %w", c.path, err)
	}
	return nil
}

func checkTable(table map[string]any, node *kong.Node, where string) error {
	for key, v := range table {
		name := strings.TrimPrefix(where+"."+key, ".")
		switch v := v.(type) {
		case map[string]any:
			child := findCommand(node, key)
			if child == nil {
				return fmt.Errorf("[%s] is not a command%s", name, suggest(key, commandNames(node)))
			}
			if err := checkTable(v, child, name); err != nil {
				return err
			}
			continue
		case []map[string]any:
			if findCommand(node, key) != nil {
				return fmt.Errorf("[[%s]] is an array of tables; a command's flags go in one table: [%s]", name, name)
			}
			return fmt.Errorf("[[%s]] is not a command%s", name, suggest(key, commandNames(node)))
		}
		if slices.Contains(notInFile, key) {
			return fmt.Errorf("%q is not settable in a config file: give --%s on the command line", key, key)
		}
		names := flagNames(node, where == "")
		if !slices.Contains(names, key) {
			in := "no command has --" + key
			if where != "" {
				in = fmt.Sprintf("[%s] has no --%s", where, key)
			}
			return fmt.Errorf("unknown key %q (%s)%s", key, in, suggest(key, names))
		}
		if _, err := flagValue(v); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	return nil
}

// Resolve gives a flag the file's value: the deepest table on the selected
// command's path that sets it, unless the flag's environment variable is set.
func (c *tomlConfig) Resolve(kctx *kong.Context, _ *kong.Path, flag *kong.Flag) (any, error) {
	for _, env := range flag.Envs {
		if _, ok := os.LookupEnv(env); ok {
			return nil, nil
		}
	}
	var path []string
	for n := kctx.Selected(); n != nil && n.Type == kong.CommandNode; n = n.Parent {
		path = append([]string{n.Name}, path...)
	}
	var found any
	table := c.values
	for i := 0; table != nil; i++ {
		if v, ok := table[flag.Name]; ok {
			if _, isTable := v.(map[string]any); !isTable {
				found = v
			}
		}
		if i == len(path) {
			break
		}
		table, _ = table[path[i]].(map[string]any)
	}
	if found == nil {
		return nil, nil
	}
	v, err := flagValue(found)
	if err != nil {
		return nil, err
	}
	// Parse it aside first, so that a bad value is said to be the file's.
	scratch := reflect.New(flag.Target.Type()).Elem()
	scan := kong.ScanFromTokens(kong.Token{Type: kong.FlagValueToken, Value: v})
	if err := flag.Mapper.Decode(&kong.DecodeContext{Value: flag.Value, Scan: scan}, scratch); err != nil {
		return nil, fmt.Errorf("in config file %s: %w", c.path, err)
	}
	return v, nil
}

// flagValue is a TOML value as the text a flag would be given.
func flagValue(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case bool:
		return strconv.FormatBool(v), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	case []any:
		items := make([]string, len(v))
		for i, it := range v {
			s, err := flagValue(it)
			if err != nil {
				return "", err
			}
			items[i] = s
		}
		return strings.Join(items, ","), nil
	}
	return "", fmt.Errorf("a %T cannot be a flag's value: want a string, number or boolean", v)
}

// findCommand is node's subcommand called name.
func findCommand(node *kong.Node, name string) *kong.Node {
	for _, child := range node.Children {
		if child.Type == kong.CommandNode && child.Name == name {
			return child
		}
	}
	return nil
}

func commandNames(node *kong.Node) []string {
	var names []string
	for _, child := range node.Children {
		if child.Type == kong.CommandNode && !child.Hidden {
			names = append(names, child.Name)
		}
	}
	return names
}

// flagNames are the flags of node and its parents, or with all those of
// every command beneath node too.
func flagNames(node *kong.Node, all bool) []string {
	var names []string
	for _, group := range node.AllFlags(false) {
		for _, f := range group {
			names = append(names, f.Name)
		}
	}
	if all {
		for _, child := range node.Children {
			names = append(names, flagNames(child, true)...)
		}
	}
	return names
}

// suggest is ", did you mean "x"?" for the closest of names to s, if any is close.
func suggest(s string, names []string) string {
	best, bestDist := "", 3
	for _, n := range names {
		if d := editDistance(s, n); d < bestDist {
			best, bestDist = n, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(", did you mean %q?", best)
}
