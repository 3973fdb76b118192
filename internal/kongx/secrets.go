package kongx

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/alecthomas/kong"
)

// CredentialsDirEnv is where systemd puts a unit's credentials
// (LoadCredential=, LoadCredentialEncrypted=).
const CredentialsDirEnv = "CREDENTIALS_DIRECTORY"

// SecretFileError is a secret's file that cannot be used.
type SecretFileError struct {
	Flag string // the file's flag, or the credential's: $CREDENTIALS_DIRECTORY/name
	Path string
	Err  error
}

func (e *SecretFileError) Error() string {
	return fmt.Sprintf("%s %s: %v", e.Flag, e.Path, e.Err)
}
func (e *SecretFileError) Unwrap() error { return e.Err }

// ErrEmptySecret is the error of a secret's file that holds nothing.
var ErrEmptySecret = errors.New("the file is empty")

// ReadSecrets sets each secret flag of the selected command from its file:
// a flag tagged secret:"NAME" names a file whose content (less a final
// newline) is the value of the flag --NAME, so that the secret is in no
// process's command line. Giving both is refused. Without either, under
// systemd, the credential NAME in $CREDENTIALS_DIRECTORY is read if it is
// there (LoadCredential=NAME:/path) and not empty. It returns the names of the flags it
// set, which count as given. Call it in an AfterApply hook; it may run
// more than once.
func ReadSecrets(kctx *kong.Context) (map[string]bool, error) {
	flags, set := SelectedFlags(kctx), map[string]bool{}
	for _, f := range kctx.Flags() {
		name := f.Tag.Get("secret")
		t := flags[name]
		if name == "" || t == nil {
			continue
		}
		path := f.Target.String()
		switch {
		case path != "" && Given(kctx, t):
			return nil, fmt.Errorf("--%s and --%s both give it; give only the file", t.Name, f.Name)
		case path == "" && Given(kctx, t):
			continue
		case path == "":
			dir := os.Getenv(CredentialsDirEnv)
			if dir == "" {
				continue
			}
			path = filepath.Join(dir, name)
			if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
				continue
			}
		}
		v, err := readSecret(path)
		if errors.Is(err, ErrEmptySecret) && f.Target.String() == "" {
			continue // an empty credential is none: a unit lists every one
		}
		if err != nil {
			from := "--" + f.Name
			if f.Target.String() == "" {
				from = "$" + CredentialsDirEnv + "/" + name
			}
			return nil, &SecretFileError{Flag: from, Path: path, Err: err}
		}
		t.Target.SetString(v)
		set[name] = true
	}
	return set, nil
}

// readSecret is a file's content less its final newline.
func readSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	v := strings.TrimRight(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n") // a file written on Windows too
	if v == "" {
		return "", ErrEmptySecret
	}
	return v, nil
}

// SecretLines is a flag's file of secrets, one a line (a publisher's
// tokens, say): read as kong decodes the flag, so the secrets never sit on
// a command line. Each line is trimmed; blank lines and those starting
// with # are skipped; a line with a space inside, or a file with no
// secret, is an error.
type SecretLines struct {
	Path   string
	Values []string
}

// Decode reads the file.
func (s *SecretLines) Decode(ctx *kong.DecodeContext) error {
	path, err := PopFlagValue(ctx, "file")
	if err != nil {
		return err
	}
	v, err := readSecret(path)
	var values []string
	for i, line := range strings.Split(v, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case err != nil:
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.ContainsFunc(line, unicode.IsSpace):
			err = fmt.Errorf("line %d holds a space: one secret a line", i+1)
		default:
			values = append(values, line)
		}
	}
	if err == nil && len(values) == 0 {
		err = ErrEmptySecret
	}
	if err != nil {
		return &SecretFileError{Flag: "--" + ctx.Value.Name, Path: path, Err: err}
	}
	s.Path, s.Values = path, values
	return nil
}
