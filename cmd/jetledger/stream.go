package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/jsretry"
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
	case f.set() != "" && len(splitList(subjects)) == 0:
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

// The warnings about a stream's limits; the command that fixes it goes
// with them as the attribute "edit".
const (
	msgLimitsDiffer = "the stream exists with other limits than the flags give; jetledger never edits an existing stream, so its own limits stay: apply the flags with the command in edit"
	msgUnlimited    = "the stream has no limits (max age, bytes, messages): prune removes a ledger row only once the stream no longer holds its message " +
		"(a row is kept while a copy of it can still be delivered or replayed), and this stream holds every message until someone purges it, " +
		"so the ledger grows by a row per message; give the stream limits with the command in edit (or run --subjects with --max-age when it is created)"
)

// msgSourceStart says why a copy made again skips the source's older
// messages.
const msgSourceStart = "the stream copies its source from start_seq: the ledger pruned the rows of messages before it, which copied again would be applied a second time; " +
	"the source's older messages are not copied, including any on subjects a broader filter takes now"

// streamSpec is the stream run creates when it is missing.
type streamSpec struct {
	Name       string
	Subjects   []string                          // none, and no Sources: the stream must exist
	Sources    []*jetstream.StreamSource         // the edge's stream sources the hub's (--hub-url)
	Transform  *jetstream.SubjectTransformConfig // partitions (--partitions)
	Duplicates time.Duration
	Limits     streamLimitFlags
	// SourceStart, asked only when the stream is created, is the sequence
	// of Sources[0] to start copying at (0: its start).
	SourceStart func(context.Context) (uint64, error)
	// Adopt, when set, is asked about a stream that exists (or was made
	// meanwhile by someone else) before it is used; its error refuses it.
	Adopt func(context.Context, *jetstream.StreamInfo) error
}

// config is the stream's configuration, with no limit where none is given
// and the metadata that says jetledger made it.
func (s streamSpec) config() jetstream.StreamConfig {
	how := "(--subjects)"
	if len(s.Sources) > 0 {
		how = "(--hub-url: a copy of the hub's stream, sourced over the leaf node)"
	}
	cfg := jetstream.StreamConfig{
		Name: s.Name, Subjects: s.Subjects, Sources: s.Sources, SubjectTransform: s.Transform, Storage: jetstream.FileStorage, Duplicates: s.Duplicates,
		Description: "created by jetledger " + how + ": its consumer applies each message once through a SQLite ledger, " +
			"which keeps a message's id while the stream holds a copy of it",
		Metadata: map[string]string{consumer.MetadataCreatedBy: "jetledger", consumer.MetadataVersion: version()},
		MaxAge:   s.Limits.MaxAge, MaxBytes: -1, MaxMsgs: -1, Replicas: max(1, s.Limits.Replicas),
	}
	if s.Limits.MaxBytes > 0 {
		cfg.MaxBytes = int64(s.Limits.MaxBytes)
	}
	if s.Limits.MaxMsgs > 0 {
		cfg.MaxMsgs = s.Limits.MaxMsgs
	}
	return cfg
}

// adopt asks spec.Adopt, if set, about the existing stream info.
func (s streamSpec) adopt(ctx context.Context, info *jetstream.StreamInfo) error {
	if s.Adopt == nil {
		return nil
	}
	return s.Adopt(ctx, info)
}

// ensureStream creates the stream when subjects are given and it is
// missing. Without subjects the stream must already exist. An existing
// stream is never edited: limits given for it that differ from its own are
// warned about, with the command that applies them. A cluster that cannot
// answer yet (a stream leader being elected) is waited for until ctx ends.
func ensureStream(ctx context.Context, js jetstream.JetStream, spec streamSpec, log *slog.Logger) (*jetstream.StreamInfo, error) {
	info, err := jsretry.Call(ctx, log, "look up stream "+spec.Name, func(ctx context.Context) (*jetstream.StreamInfo, error) {
		s, err := js.Stream(ctx, spec.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) && (len(spec.Subjects) > 0 || len(spec.Sources) > 0) {
			return nil, nil // created below
		}
		if err != nil {
			return nil, err
		}
		return s.CachedInfo(), nil
	})
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return nil, fmt.Errorf("stream %s does not exist; pass --subjects to create it", spec.Name)
	case err != nil:
		return nil, err
	case info != nil:
		if len(spec.Subjects) > 0 || len(spec.Sources) > 0 {
			warnLimitsDiffer(ctx, info.Config, spec.Limits, log)
		}
		return info, spec.adopt(ctx, info)
	}
	if spec.SourceStart != nil {
		seq, err := spec.SourceStart(ctx)
		if err != nil {
			return nil, fmt.Errorf("stream %s: where to start copying %s: %w", spec.Name, spec.Sources[0].Name, err)
		}
		spec.Sources[0].OptStartSeq = seq
	}
	made := false
	info, err = jsretry.Call(ctx, log, "create stream "+spec.Name, func(ctx context.Context) (*jetstream.StreamInfo, error) {
		s, err := js.CreateStream(ctx, spec.config())
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			// Made meanwhile, by another run or by a try of ours whose
			// answer was lost: it is used as any existing one is.
			s, err = js.Stream(ctx, spec.Name)
		} else {
			made = err == nil
		}
		if err != nil {
			return nil, err
		}
		return s.CachedInfo(), nil
	})
	switch {
	case err != nil:
		return nil, err
	case !made:
		warnLimitsDiffer(ctx, info.Config, spec.Limits, log)
		return info, spec.adopt(ctx, info)
	}
	log.InfoContext(ctx, "created stream", "stream", spec.Name, "subjects", spec.Subjects, "sources", len(spec.Sources), "duplicate_window", spec.Duplicates,
		"max_age", spec.Limits.MaxAge, "max_bytes", spec.Limits.MaxBytes, "max_msgs", spec.Limits.MaxMsgs)
	if len(spec.Sources) > 0 && spec.Sources[0].OptStartSeq > 1 {
		log.WarnContext(ctx, msgSourceStart, "stream", spec.Name, "source", spec.Sources[0].Name, "start_seq", spec.Sources[0].OptStartSeq)
	}
	return info, nil
}

// warnLimitsDiffer warns, once, when limits given on the command line
// differ from those of the existing stream. It does not refuse: run never
// edits a stream, and stopping would not help, as a stream whose limits
// are shorter than wanted drops unconsumed messages all the faster while
// nothing consumes them.
func warnLimitsDiffer(ctx context.Context, have jetstream.StreamConfig, want streamLimitFlags, log *slog.Logger) {
	var attrs []any
	var edit []string
	if want.MaxAge > 0 && want.MaxAge != have.MaxAge {
		attrs = append(attrs, "max_age", have.MaxAge, "max_age_flag", want.MaxAge)
		edit = append(edit, "--max-age "+want.MaxAge.String())
	}
	if want.MaxBytes > 0 && int64(want.MaxBytes) != have.MaxBytes {
		attrs = append(attrs, "max_bytes", have.MaxBytes, "max_bytes_flag", int64(want.MaxBytes))
		edit = append(edit, "--max-bytes "+strconv.FormatInt(int64(want.MaxBytes), 10))
	}
	if want.MaxMsgs > 0 && want.MaxMsgs != have.MaxMsgs {
		attrs = append(attrs, "max_msgs", have.MaxMsgs, "max_msgs_flag", want.MaxMsgs)
		edit = append(edit, "--max-msgs "+strconv.FormatInt(want.MaxMsgs, 10))
	}
	if len(edit) == 0 {
		return
	}
	cmd := "nats stream edit " + have.Name + " " + strings.Join(edit, " ")
	log.WarnContext(ctx, msgLimitsDiffer, append([]any{"stream", have.Name, "edit", cmd}, attrs...)...)
}

// unlimited reports whether a stream never drops a message by itself: it
// keeps messages by limits and has none, so its first sequence stays put.
func unlimited(cfg jetstream.StreamConfig) bool {
	return cfg.Retention == jetstream.LimitsPolicy && cfg.MaxAge == 0 && cfg.MaxBytes <= 0 && cfg.MaxMsgs <= 0 && cfg.MaxMsgsPerSubject <= 0
}

// warnUnlimited warns when the stream consumed keeps every message: prune
// keeps a ledger row while any copy of its id can still be delivered or
// replayed, which in such a stream is forever.
func warnUnlimited(ctx context.Context, cfg jetstream.StreamConfig, log *slog.Logger) {
	if !unlimited(cfg) {
		return
	}
	log.WarnContext(ctx, msgUnlimited, "stream", cfg.Name, "edit", "nats stream edit "+cfg.Name+" --max-age 7d")
}

// requireJetStream refuses a server without JetStream for this account: the
// start-up calls would otherwise wait for it forever, since "no responders"
// also means a cluster electing a leader. A server with JetStream answers
// the account request even then ("temporarily unavailable"), so only this
// answer is taken as final; any other failure is left to the calls after.
func requireJetStream(ctx context.Context, js jetstream.JetStream, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := js.AccountInfo(ctx)
	if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		return fmt.Errorf("the server at %s has no JetStream for this account (%v): enable JetStream there, or leave out --nats to use the embedded server", redactURL(url), err)
	}
	return nil
}
