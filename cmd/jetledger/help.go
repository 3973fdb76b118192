package main

import (
	"github.com/alecthomas/kong"
)

// helpCmd is `jetledger help [COMMAND...]`: the help of that command, as
// `jetledger COMMAND --help` prints it.
type helpCmd struct {
	Command []string `arg:"" optional:"" help:"the command, such as: outbox cancel"`
}

func (h *helpCmd) Run(kctx *kong.Context) error {
	target, err := kong.Trace(kctx.Kong, h.Command)
	if err != nil {
		return err
	}
	if target.Error != nil {
		return usageError{target.Error}
	}
	return target.PrintUsage(false)
}
