package stream

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

// Limits are the limits of a stream Ensure creates. They are what lets the
// ledger shrink: prune keeps a row while a copy of its id can still be
// delivered or replayed, that is while the stream still holds it, so only a
// stream that drops old messages lets rows go. The zero value is no limit.
type Limits struct {
	// MaxAge drops messages older than this, consumed or not. Default 0:
	// none.
	MaxAge time.Duration
	// MaxBytes drops the oldest messages past this size in bytes. Default
	// 0: none.
	MaxBytes int64
	// MaxMsgs drops the oldest messages past this many. Default 0: none.
	MaxMsgs int64
	// Replicas is the number of copies of the stream in a cluster. Default
	// 0: 1; at most 5.
	Replicas int
}

// Config is the stream Ensure creates when it is missing. Only Name is
// required; with neither Subjects nor Sources the stream must exist.
type Config struct {
	// Name of the stream. Required.
	Name string
	// Subjects the stream captures when Ensure creates it. Default none.
	Subjects []string
	// Sources the stream copies when Ensure creates it (an edge's copy of
	// the hub's stream: see EnsureSourced). Default none.
	Sources []*jetstream.StreamSource
	// Transform maps the subjects (the partition mapping). Default none.
	Transform *jetstream.SubjectTransformConfig
	// Duplicates is the duplicate window of a stream Ensure creates.
	// Default 0: the server's.
	Duplicates time.Duration
	// Limits of a stream Ensure creates; those of an existing stream that
	// differ are warned about, never applied.
	Limits Limits
	// Version is the jetledger release recorded in the stream's metadata.
	// Default "": none recorded.
	Version string
	// Names are what Check's refusals call the settings: a setting's path
	// in Config ("Limits.MaxAge") to the caller's name for it ("--max-age").
	// Default: the paths.
	Names map[string]string
	// Logger receives the warnings and the waits. Default slog.Default().
	Logger *slog.Logger

	// sourceStart, asked only when the stream is created, is the sequence
	// of Sources[0] to start copying at (0: its start).
	sourceStart func(context.Context) (uint64, error)
	// adopt, when set, is asked about a stream that exists (or was made
	// meanwhile by someone else) before it is used; its error refuses it.
	adopt func(context.Context, *jetstream.StreamInfo) error
	// beforeCreate, when set, is called with the configuration just
	// before the stream is created.
	beforeCreate func(context.Context, jetstream.StreamConfig)
	// meta is added to the metadata of the stream created.
	meta map[string]string
}

func (c Config) creates() bool { return len(c.Subjects) > 0 || len(c.Sources) > 0 }

func (c Config) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.Default()
	}
	return c.Logger
}

// config is the stream's configuration, with no limit where none is given
// and the metadata that says jetledger made it.
func (c Config) config() jetstream.StreamConfig {
	how := "(capturing its subjects)"
	if len(c.Sources) > 0 {
		how = "(a copy of the hub's stream, sourced over the leaf node)"
	}
	cfg := jetstream.StreamConfig{
		Name: c.Name, Subjects: c.Subjects, Sources: c.Sources, SubjectTransform: c.Transform, Storage: jetstream.FileStorage, Duplicates: c.Duplicates,
		Description: "created by jetledger " + how + ": its consumer applies each message once through a SQLite ledger, " +
			"which keeps a message's id while the stream holds a copy of it",
		Metadata: map[string]string{consumer.MetadataCreatedBy: "jetledger", consumer.MetadataVersion: c.Version},
		MaxAge:   c.Limits.MaxAge, MaxBytes: -1, MaxMsgs: -1, Replicas: max(1, c.Limits.Replicas),
	}
	for k, v := range c.meta {
		cfg.Metadata[k] = v
	}
	if c.Limits.MaxBytes > 0 {
		cfg.MaxBytes = c.Limits.MaxBytes
	}
	if c.Limits.MaxMsgs > 0 {
		cfg.MaxMsgs = c.Limits.MaxMsgs
	}
	return cfg
}

// adopted asks c.adopt, if set, about the existing stream info.
func (c Config) adopted(ctx context.Context, info *jetstream.StreamInfo) (*jetstream.StreamInfo, error) {
	if c.adopt == nil {
		return info, nil
	}
	return info, c.adopt(ctx, info)
}

// msgSourceStart says why a copy made again skips the source's older
// messages.
const msgSourceStart = "the stream copies its source from start_seq: the ledger pruned the rows of messages before it, which copied again would be applied a second time; " +
	"the source's older messages are not copied, including any on subjects a broader filter takes now"

// Ensure creates the stream when subjects or sources are given and it is
// missing; without them the stream must already exist (ErrNotFound). An
// existing stream is never edited: limits given for it that differ from its
// own are warned about, with the command that applies them. A cluster that
// cannot answer yet (a stream leader being elected) is waited for until ctx
// ends.
func Ensure(ctx context.Context, js jetstream.JetStream, c Config) (*jetstream.StreamInfo, error) {
	if err := c.Check(); err != nil {
		return nil, fmt.Errorf("stream: ensure: %w", err)
	}
	log := c.logger()
	info, err := jsretry.Call(ctx, log, "look up stream "+c.Name, func(ctx context.Context) (*jetstream.StreamInfo, error) {
		s, err := js.Stream(ctx, c.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) && c.creates() {
			return nil, nil // created below
		}
		if err != nil {
			return nil, err
		}
		return s.CachedInfo(), nil
	})
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return nil, fmt.Errorf("stream: ensure %s: %w", c.Name, ErrNotFound)
	case err != nil:
		return nil, err
	case info != nil:
		if c.creates() {
			warnLimitsDiffer(ctx, info.Config, c.Limits, log)
		}
		return c.adopted(ctx, info)
	}
	return create(ctx, js, c, log)
}

// create makes the missing stream; one made meanwhile is used as an
// existing one is.
func create(ctx context.Context, js jetstream.JetStream, c Config, log *slog.Logger) (*jetstream.StreamInfo, error) {
	if c.sourceStart != nil {
		seq, err := c.sourceStart(ctx)
		if err != nil {
			return nil, fmt.Errorf("stream %s: where to start copying %s: %w", c.Name, c.Sources[0].Name, err)
		}
		c = c.startingAt(seq)
	}
	if c.beforeCreate != nil {
		c.beforeCreate(ctx, c.config())
	}
	made := false
	info, err := jsretry.Call(ctx, log, "create stream "+c.Name, func(ctx context.Context) (*jetstream.StreamInfo, error) {
		s, err := jsretry.CreateStream(ctx, js, c.config())
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			// Made meanwhile, by another run or by a try of ours whose
			// answer was lost: it is used as any existing one is.
			s, err = js.Stream(ctx, c.Name)
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
		warnLimitsDiffer(ctx, info.Config, c.Limits, log)
		return c.adopted(ctx, info)
	}
	log.InfoContext(ctx, "created stream", "stream", c.Name, "subjects", c.Subjects, "sources", len(c.Sources), "duplicate_window", c.Duplicates,
		"max_age", c.Limits.MaxAge, "max_bytes", c.Limits.MaxBytes, "max_msgs", c.Limits.MaxMsgs)
	if len(info.Config.Sources) > 0 {
		if start := startOf(info.Config, info.Config.Sources[0]); start > 1 {
			log.WarnContext(ctx, msgSourceStart, "stream", c.Name, "source", c.Sources[0].Name, "start_seq", start)
		}
	}
	return info, nil
}

// startingAt is c with its first source starting at seq: on the source,
// or for a durable source on its consumer, recorded in the metadata.
func (c Config) startingAt(seq uint64) Config {
	src := *c.Sources[0]
	c.Sources = append([]*jetstream.StreamSource{&src}, c.Sources[1:]...)
	if src.Consumer == nil {
		src.OptStartSeq = seq
		return c
	}
	meta := map[string]string{MetaSourceStart: strconv.FormatUint(seq, 10)}
	for k, v := range c.meta {
		meta[k] = v
	}
	c.meta = meta
	return c
}

// The messages of the warnings about a stream's limits, for those who read
// the log records; the command that fixes it goes with them as the
// attribute "edit".
const (
	// MsgLimitsDiffer: an existing stream's limits differ from Config's.
	MsgLimitsDiffer = "the stream exists with other limits than Config.Limits gives; jetledger never edits an existing stream, so its own limits stay: apply them with the command in edit"
	// MsgUnlimited: the stream keeps every message (WarnUnlimited).
	MsgUnlimited = "the stream has no limits (max age, bytes, messages): prune removes a ledger row only once the stream no longer holds its message " +
		"(a row is kept while a copy of it can still be delivered or replayed), and this stream holds every message until someone purges it, " +
		"so the ledger grows by a row per message; give the stream limits with the command in edit (or create it with Limits.MaxAge)"
)

// warnLimitsDiffer warns, once, when the limits wanted differ from those of
// the existing stream. It does not refuse: jetledger never edits a stream,
// and stopping would not help, as a stream whose limits are shorter than
// wanted drops unconsumed messages all the faster while nothing consumes
// them.
func warnLimitsDiffer(ctx context.Context, have jetstream.StreamConfig, want Limits, log *slog.Logger) {
	var attrs []any
	var edit []string
	if want.MaxAge > 0 && want.MaxAge != have.MaxAge {
		attrs = append(attrs, "max_age", have.MaxAge, "max_age_flag", want.MaxAge)
		edit = append(edit, "--max-age "+want.MaxAge.String())
	}
	if want.MaxBytes > 0 && want.MaxBytes != have.MaxBytes {
		attrs = append(attrs, "max_bytes", have.MaxBytes, "max_bytes_flag", want.MaxBytes)
		edit = append(edit, "--max-bytes "+strconv.FormatInt(want.MaxBytes, 10))
	}
	if want.MaxMsgs > 0 && want.MaxMsgs != have.MaxMsgs {
		attrs = append(attrs, "max_msgs", have.MaxMsgs, "max_msgs_flag", want.MaxMsgs)
		edit = append(edit, "--max-msgs "+strconv.FormatInt(want.MaxMsgs, 10))
	}
	if len(edit) == 0 {
		return
	}
	cmd := "nats stream edit " + have.Name + " " + strings.Join(edit, " ")
	log.WarnContext(ctx, MsgLimitsDiffer, append([]any{"stream", have.Name, "edit", cmd}, attrs...)...)
}

// Unlimited reports whether a stream never drops a message by itself: it
// keeps messages by limits and has none, so its first sequence stays put.
func Unlimited(cfg jetstream.StreamConfig) bool {
	return cfg.Retention == jetstream.LimitsPolicy && cfg.MaxAge == 0 && cfg.MaxBytes <= 0 && cfg.MaxMsgs <= 0 && cfg.MaxMsgsPerSubject <= 0
}

// WarnUnlimited warns when the stream consumed keeps every message: prune
// keeps a ledger row while any copy of its id can still be delivered or
// replayed, which in such a stream is forever.
func WarnUnlimited(ctx context.Context, cfg jetstream.StreamConfig, log *slog.Logger) {
	if !Unlimited(cfg) {
		return
	}
	log.WarnContext(ctx, MsgUnlimited, "stream", cfg.Name, "edit", "nats stream edit "+cfg.Name+" --max-age 7d")
}

// RequireJetStream refuses (ErrNoJetStream) a server without JetStream for
// this account: the start-up calls would otherwise wait for it forever,
// since "no responders" also means a cluster electing a leader. A server
// with JetStream answers the account request even then ("temporarily
// unavailable"), so only this answer is taken as final; any other failure
// is left to the calls after. It waits 5s at most.
func RequireJetStream(ctx context.Context, js jetstream.JetStream) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := js.AccountInfo(ctx)
	if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		return fmt.Errorf("stream: %w (%w)", ErrNoJetStream, err)
	}
	return nil
}
