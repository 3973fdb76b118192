package main

import (
	"errors"

	"github.com/alecthomas/kong"

	"github.com/jetledger/jetledger/consumer/outbox/webhook"
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

// checkName refuses a stream or consumer name that NATS would
// (stream.CheckName), naming flag.
func checkName(flag, name string) error { return configUsage(stream.CheckName(flag, name)) }

// refused is a library's refusal of a setting, said as its Reason alone.
type refused struct {
	reason string
	err    error
}

func (r refused) Error() string { return r.reason }
func (r refused) Unwrap() error { return r.err }

// configUsage is err, if it is a refused config (a *service.ConfigError,
// or natsconn's, webhook's or stream's), the usage error of its Reason
// (exit 2): the library said it in the flags' words.
func configUsage(err error) error {
	var (
		sc *service.ConfigError
		nc *natsconn.ConfigError
		wc *webhook.ConfigError
		tc *stream.ConfigError
	)
	switch {
	case errors.As(err, &sc):
		return usageError{refused{sc.Reason, err}}
	case errors.As(err, &nc):
		return usageError{refused{nc.Reason, err}}
	case errors.As(err, &wc):
		return usageError{refused{wc.Reason, err}}
	case errors.As(err, &tc):
		return usageError{refused{tc.Reason, err}}
	}
	return err
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
