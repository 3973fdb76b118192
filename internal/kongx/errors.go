package kongx

import "fmt"

// Errors are said in the command line's terms, for a user to read after
// the program's name; kong wraps those of parsing in a *kong.ParseError.
// Check them with errors.As.

// MissingValueError is a flag that takes a value given none: it ended the
// command line, or the word after it is another flag.
type MissingValueError struct {
	Flag string // --name
	Next string // the flag that followed it, if any
}

func (e *MissingValueError) Error() string {
	if e.Next == "" {
		return e.Flag + " needs a value"
	}
	return fmt.Sprintf("%s needs a value, not the flag %s (write %s=VALUE for a value that starts with '-')", e.Flag, e.Next, e.Flag)
}

// EmptyValueError is a string flag given an empty value, on the command
// line or (InFile) in the config file.
type EmptyValueError struct {
	Flag   string // --name
	InFile bool
}

func (e *EmptyValueError) Error() string {
	if e.InFile {
		return e.Flag + " is empty in the config file: give it a value, or leave it out"
	}
	return e.Flag + " is empty: give it a value, or leave the flag out"
}

// ConfigFileError is a config file that cannot be read, is no TOML, or
// sets what no flag of its command is.
type ConfigFileError struct {
	Path string
	Err  error
}

func (e *ConfigFileError) Error() string { return "config file " + e.Path + ": " + e.Err.Error() }

func (e *ConfigFileError) Unwrap() error { return e.Err }
