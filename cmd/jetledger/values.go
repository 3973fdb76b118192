package main

import (
	"net"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/alecthomas/kong"

	"github.com/jetledger/jetledger/internal/kongx"
	"github.com/jetledger/jetledger/stream"
)

// popFlagValue reads the value of a flag of a custom type for kong,
// refusing a missing one (kongx.PopFlagValue).
func popFlagValue(ctx *kong.DecodeContext, what string) (string, error) {
	return kongx.PopFlagValue(ctx, what)
}

// maxNameLen is the longest stream or consumer name NATS accepts
// (nats-server's JSMaxNameLen).
const maxNameLen = 255

// checkName refuses a stream or consumer name that NATS would: empty, too
// long, or with '.', '*', '>', '/', '\' or whitespace (nats-server's
// isValidAssetName; nats.go's jetstream checks a subset of it).
func checkName(flag, name string) error {
	switch {
	case name == "":
		return usagef("%s needs a name", flag)
	case len(name) > maxNameLen:
		return usagef("%s is %d bytes long; NATS allows at most %d", flag, len(name), maxNameLen)
	case strings.ContainsAny(name, `.*>/\`) || strings.ContainsFunc(name, unicode.IsSpace):
		return usagef(`%s %q: a NATS name may not contain '.', '*', '>', '/', '\' or whitespace`, flag, name)
	}
	return nil
}

// hostPort reads the host:port of flag; port 0 picks a free port.
func hostPort(flag, addr string) (host string, port int, err error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, usagef("%s %q: want host:port", flag, addr)
	}
	port, err = strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, usagef("%s %q: the port must be a number from 0 to 65535", flag, addr)
	}
	return host, port, nil
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

// checkSubjects refuses a --subjects entry that is no NATS subject
// (stream.ValidSubject).
func checkSubjects(list string) error {
	for _, subject := range kongx.SplitList(list) {
		if !stream.ValidSubject(subject) {
			return usagef("--subjects %q: not a NATS subject (tokens separated by '.'; '*' stands for one token, a last '>' for the rest)", subject)
		}
	}
	return nil
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
