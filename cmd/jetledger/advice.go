package main

// reworded is an error said in the command line's terms, or with its
// advice (its flags and commands), keeping what it is.
type reworded struct {
	err error
	msg string
}

func (r reworded) Error() string { return r.msg }
func (r reworded) Unwrap() error { return r.err }
