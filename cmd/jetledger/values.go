package main

import (
	"errors"

	"github.com/alecthomas/kong"

	"github.com/jetledger/jetledger/internal/kongx"
	"github.com/jetledger/jetledger/stream"
)

// popFlagValue reads the value of a flag of a custom type for kong,
// refusing a missing one (kongx.PopFlagValue).
func popFlagValue(ctx *kong.DecodeContext, what string) (string, error) {
	return kongx.PopFlagValue(ctx, what)
}

// checkName refuses a stream or consumer name that NATS would
// (stream.CheckName), naming flag.
func checkName(flag, name string) error { return configUsage(stream.CheckName(flag, name)) }

// refused is a library's refusal of a setting said in the caller's words:
// the *ConfigError of each package that names settings.
type refused interface {
	error
	Refusal() string
}

// configUsage is err, if it is a library's refused config (any
// *ConfigError, which says its Refusal in the flags' words), the usage
// error of its Refusal (exit 2).
func configUsage(err error) error {
	if r := refused(nil); errors.As(err, &r) {
		return usageError{reworded{err, r.Refusal()}}
	}
	return err
}
