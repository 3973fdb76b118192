package main

import (
	"errors"
	"time"

	"github.com/alecthomas/kong"

	"github.com/jetledger/jetledger/internal/kongx"
	"github.com/jetledger/jetledger/natsconn"
	"github.com/jetledger/jetledger/service"
	"github.com/jetledger/jetledger/stream"
)

// popFlagValue reads the value of a flag of a custom type for kong,
// refusing a missing one (kongx.PopFlagValue).
func popFlagValue(ctx *kong.DecodeContext, what string) (string, error) {
	return kongx.PopFlagValue(ctx, what)
}

// maxNameLen is the longest stream or consumer name NATS accepts.
const maxNameLen = stream.MaxNameLen

// checkName refuses a stream or consumer name that NATS would
// (stream.CheckName), naming flag.
func checkName(flag, name string) error {
	if ce := (*stream.ConfigError)(nil); errors.As(stream.CheckName(flag, name), &ce) {
		return usagef("%s", ce.Reason)
	}
	return nil
}

// hostPort reads the host:port of flag (service.HostPort); port 0 picks a
// free port.
func hostPort(flag, addr string) (host string, port int, err error) {
	host, port, err = service.HostPort(flag, addr)
	return host, port, configUsage(err)
}

// reason is a refused config said as its Reason alone, in the flags' words.
type reason struct{ *service.ConfigError }

func (r reason) Error() string { return r.Reason }
func (r reason) Unwrap() error { return r.ConfigError }

// configUsage is err, if it is a refused config (*service.ConfigError,
// *natsconn.ConfigError), the usage error of its Reason (exit 2).
func configUsage(err error) error {
	if ce := (*service.ConfigError)(nil); errors.As(err, &ce) {
		return usageError{reason{ce}}
	}
	if ce := (*natsconn.ConfigError)(nil); errors.As(err, &ce) {
		return usagef("%s", ce.Reason)
	}
	return err
}

// checkDurations refuses a negative duration among flags (name to value).
func checkDurations(flags ...durationFlag) error {
	for _, f := range flags {
		if f.v < 0 {
			return usagef("%s %s: must not be negative", f.name, f.v)
		}
	}
	return nil
}

// durationFlag is a duration flag's name and value, for checkDurations.
type durationFlag struct {
	name string
	v    time.Duration
}

// firstError is the first of errs that is not nil.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
