package kongx

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

	"github.com/jetledger/jetledger/internal/editdist"
)

// tomlConfig is a config file: TOML whose keys are flag names as written
// on the command line, without the dashes.
//
//	db = "/var/lib/app/app.db"    # every command that has --db
//	[run]                         # run only, over the top level
//	deadline = "30s"
//	[outbox.cancel]               # outbox cancel, over [outbox]
//	delete-url = "https://example.com/items/{id}"
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

// ReadConfigFlag is the BeforeResolve hook of a --config flag (a type
// whose underlying type is string): it reads the file the flag names and
// adds it as a resolver. An empty value is an error naming the flag.
//
//	type configFlag string
//
//	func (configFlag) BeforeResolve(kctx *kong.Context, trace *kong.Path) error {
//		return kongx.ReadConfigFlag(kctx, trace)
//	}
func ReadConfigFlag(kctx *kong.Context, trace *kong.Path) error {
	v := reflect.ValueOf(kctx.FlagValue(trace.Flag))
	if v.Kind() != reflect.String || v.String() == "" {
		return fmt.Errorf("--%s is empty: give a file, or leave the flag out", trace.Flag.Name)
	}
	return LoadConfig(kctx, kong.ExpandPath(v.String()))
}

// LoadConfig reads the TOML file at path and adds it as a resolver; its
// keys are checked against the application's commands and flags when kong
// validates. Errors name the file.
func LoadConfig(kctx *kong.Context, path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &ConfigFileError{Path: path, Err: errors.New("no such file")}
	}
	if err != nil {
		return &ConfigFileError{Path: path, Err: err}
	}
	defer f.Close()
	cfg := &tomlConfig{path: path}
	if _, err := toml.NewDecoder(f).Decode(&cfg.values); err != nil {
		return &ConfigFileError{Path: path, Err: err}
	}
	kctx.AddResolver(cfg)
	return nil
}

// Validate checks every key of the file against the application's commands
// and flags.
func (c *tomlConfig) Validate(app *kong.Application) error {
	if err := checkTable(c.values, app.Node, "", earlyFlags(app.Node)); err != nil {
		return &ConfigFileError{Path: c.path, Err: err}
	}
	return nil
}

// earlyFlags are the flags a config file cannot set: those that act before
// the file is read (a BeforeReset or BeforeResolve hook: --help, --version,
// the --config flag itself).
func earlyFlags(node *kong.Node) []string {
	var names []string
	hooked := func(v reflect.Value) bool {
		return v.MethodByName("BeforeReset").IsValid() || v.MethodByName("BeforeResolve").IsValid()
	}
	for _, group := range node.AllFlags(false) {
		for _, f := range group {
			if hooked(f.Target) || f.Target.CanAddr() && hooked(f.Target.Addr()) {
				names = append(names, f.Name)
			}
		}
	}
	for _, child := range node.Children {
		names = append(names, earlyFlags(child)...)
	}
	return names
}

func checkTable(table map[string]any, node *kong.Node, where string, notInFile []string) error {
	for key, v := range table {
		name := strings.TrimPrefix(where+"."+key, ".")
		switch v := v.(type) {
		case map[string]any:
			child := FindCommand(node, key)
			if child == nil {
				return fmt.Errorf("[%s] is not a command%s", name, Suggest(key, CommandNames(node)))
			}
			if err := checkTable(v, child, name, notInFile); err != nil {
				return err
			}
			continue
		case []map[string]any:
			if FindCommand(node, key) != nil {
				return fmt.Errorf("[[%s]] is an array of tables; a command's flags go in one table: [%s]", name, name)
			}
			return fmt.Errorf("[[%s]] is not a command%s", name, Suggest(key, CommandNames(node)))
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
			return fmt.Errorf("unknown key %q (%s)%s", key, in, Suggest(key, names))
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

// FindCommand is node's subcommand called name, or nil.
func FindCommand(node *kong.Node, name string) *kong.Node {
	for _, child := range node.Children {
		if child.Type == kong.CommandNode && child.Name == name {
			return child
		}
	}
	return nil
}

// CommandNames are the names of node's visible subcommands.
func CommandNames(node *kong.Node) []string {
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

// Suggest is `, did you mean "x"?` for the closest of names to s, if any
// is close (an edit distance under 3), else "".
func Suggest(s string, names []string) string {
	best, bestDist := "", 3
	for _, n := range names {
		if d := editdist.Distance(s, n); d < bestDist {
			best, bestDist = n, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(", did you mean %q?", best)
}
