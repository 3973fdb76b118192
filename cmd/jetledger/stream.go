package main

import (
	"log/slog"
	"time"

	"github.com/jetledger/jetledger/internal/kongx"
	"github.com/jetledger/jetledger/stream"
	"github.com/nats-io/nats.go/jetstream"
)

// streamLimitFlags are the limits of the stream --subjects creates. They
// are what lets the ledger shrink: prune keeps a row while a copy of its id
// can still be delivered or replayed, that is while the stream still holds
// it, so only a stream that drops old messages lets rows go.
type streamLimitFlags struct {
	MaxAge   time.Duration `name:"max-age" placeholder:"DURATION" help:"a stream created by --subjects drops messages older than this, consumed or not (default: none; a stream with no limit at all keeps every message, and so the ledger every row)"`
	MaxBytes byteSize      `name:"max-bytes" placeholder:"SIZE" help:"a stream created by --subjects drops its oldest messages past this size, such as 10GiB, consumed or not (default: none)"`
	MaxMsgs  int64         `name:"max-msgs" placeholder:"N" help:"a stream created by --subjects drops its oldest messages past this many, consumed or not (default: none)"`
	Replicas int           `name:"replicas" placeholder:"N" help:"copies of the stream --subjects creates, on as many servers of a cluster: 3 survives the loss of a node (default 1; at most 5)"`
}

// validate refuses negative limits, limits without --subjects (they are
// applied only to a stream run creates), and an age shorter than the
// duplicate window, which the server would refuse.
func (f streamLimitFlags) validate(subjects string, dupWindow time.Duration) error {
	if err := checkDurations(durationFlag{"--max-age", f.MaxAge}); err != nil {
		return err
	}
	switch {
	case f.MaxMsgs < 0:
		return usagef("--max-msgs %d: want a positive number (0: no limit)", f.MaxMsgs)
	case f.Replicas < 0 || f.Replicas > 5:
		return usagef("--replicas %d: want 1 to 5 (JetStream's limit)", f.Replicas)
	case f.set() != "" && len(kongx.SplitList(subjects)) == 0:
		return usagef("--%s applies to the stream run creates (with --subjects or --hub-url); give one, or set an existing stream's limits with nats stream edit", f.set())
	case f.MaxAge > 0 && f.MaxAge < dupWindow:
		return usagef("--max-age %s is shorter than the duplicate window %s of the stream --subjects creates: raise --max-age or lower --duplicate-window",
			f.MaxAge, dupWindow)
	}
	return nil
}

// set names the first limit given, or is empty.
func (f streamLimitFlags) set() string {
	switch {
	case f.MaxAge > 0:
		return "max-age"
	case f.MaxBytes > 0:
		return "max-bytes"
	case f.MaxMsgs > 0:
		return "max-msgs"
	case f.Replicas > 0:
		return "replicas"
	}
	return ""
}

// streamSpec is the stream run creates when it is missing (stream.Config).
type streamSpec struct {
	Name       string
	Subjects   []string                          // none: the stream must exist
	Transform  *jetstream.SubjectTransformConfig // partitions (--partitions)
	Duplicates time.Duration
	Limits     streamLimitFlags
}

// config maps the spec to the library's.
func (s streamSpec) config(log *slog.Logger) stream.Config {
	return stream.Config{Name: s.Name, Subjects: s.Subjects, Transform: s.Transform, Duplicates: s.Duplicates, Version: version(), Logger: log,
		Limits: stream.Limits{MaxAge: s.Limits.MaxAge, MaxBytes: int64(s.Limits.MaxBytes), MaxMsgs: s.Limits.MaxMsgs, Replicas: s.Limits.Replicas}}
}
