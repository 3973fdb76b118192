package stream

import (
	"context"
	"fmt"
	"time"

	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// Sourced is an edge's stream: a copy of the hub's stream, sourced over a
// leaf connection from the hub's JetStream domain.
type Sourced struct {
	// Stream is the copy; its Subjects and Sources are set by
	// EnsureSourced. Stream.Name is required.
	Stream Config
	// Hub is the name of the hub's stream the copy sources. Required.
	Hub string
	// Filter, when set, copies only the hub's messages on this subject.
	// Default "": all.
	Filter string
	// Domain is the hub's JetStream domain. Default "": this one.
	Domain string
	// Site is this site's name (its JetStream domain). When set, a copy
	// EnsureSourced creates sources the hub's stream through a durable
	// consumer of its own on the hub (created by EnsureHubConsumer), which
	// resumes within seconds after an outage where an ephemeral source
	// takes 30-40 s; the sourcing server (this one) must be nats-server
	// 2.15 or later, the hub 2.14 or later. Default "": an ephemeral
	// source.
	Site string
	// Start is the hub's sequence to copy from when the copy is created and
	// the ledger recorded no floor for it (a ledger pruned by an earlier
	// release, otherwise refused with ErrNoFloor). Default 0: none given.
	Start uint64
	// Ledger records the floors and the instances served. Required.
	Ledger *ledger.Store
	// Names are what the refusals call Sourced's settings
	// (NoFloorError.Names). Default: their paths.
	Names map[string]string
}

func (s Sourced) validate() error {
	switch {
	case s.Hub == "":
		return fmt.Errorf("%w: Sourced without Hub", ErrInvalidConfig)
	case s.Ledger == nil:
		return fmt.Errorf("%w: Sourced without Ledger", ErrInvalidConfig)
	}
	return nil
}

// EnsureSourced creates the edge's stream sourcing the hub's, if it is
// missing, and warns when an existing one does not source it. The source is
// addressed by the hub's domain, so it works over the leaf connection and
// resumes where it stopped when the link comes back. The window is set:
// since nats-server 2.14 a stream with sources has none by default.
// A stream made again starts copying where the ledger's pruned rows end,
// so that nothing pruned is copied and applied again; one that exists and
// jetledger did not make is refused (ErrBelowFloor) if it copies from below
// there.
func EnsureSourced(ctx context.Context, js jetstream.JetStream, s Sourced) (*jetstream.StreamInfo, error) {
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("stream: ensure sourced: %w", err)
	}
	c, st, log := s.Stream, s.Ledger, s.Stream.logger()
	src := &jetstream.StreamSource{Name: s.Hub, FilterSubject: s.Filter, Domain: s.Domain}
	if s.Site != "" {
		src = newCopySource(s.Hub, s.Domain, s.Site, c.Name)
		c.meta = map[string]string{MetaSourceFilter: s.Filter}
		c.beforeCreate = func(ctx context.Context, cfg jetstream.StreamConfig) {
			// Made first, the consumer answers the copy's first request;
			// made after, it answers only after a 5 s wait. Without the
			// hub it is made later (KeepHubConsumer).
			ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			_ = EnsureHubConsumer(ctx, js, &jetstream.StreamInfo{Config: cfg})
		}
	}
	c.Subjects, c.Sources = nil, []*jetstream.StreamSource{src}
	c.sourceStart = func(ctx context.Context) (uint64, error) {
		return sourceStart(ctx, js, c.Name, src, s.Start, st, log, s.Names)
	}
	c.adopt = func(ctx context.Context, info *jetstream.StreamInfo) error {
		return adoptSourced(ctx, js, st, info, log)
	}
	info, err := Ensure(ctx, js, c)
	if err != nil {
		return nil, fmt.Errorf("%w (sourcing %s from the hub's domain %s)", err, s.Hub, s.Domain)
	}
	switch {
	case !sourcesAs(info.Config, src, s.Filter):
		log.WarnContext(ctx, "the stream does not source the hub's stream as Sourced's Hub, Filter and Domain say; it is used as it is",
			"stream", c.Name, "hub_stream", s.Hub, "hub_filter", s.Filter, "hub_domain", s.Domain)
	case s.Site != "" && durableSource(info.Config) == nil:
		log.WarnContext(ctx, "the stream sources the hub's stream without a durable consumer (made by an earlier release, or by hand): after an outage it takes new messages 30-40 s after the link is back, not seconds; "+
			"to change that, stop run, delete the stream (nats stream rm) and start run, which makes it again from where the ledger pruned",
			"stream", c.Name, "hub_stream", s.Hub)
	}
	return info, nil
}

// sourcesAs reports whether cfg sources what src does, with filter (a
// durable source's filter is on its consumer, recorded in the metadata).
func sourcesAs(cfg jetstream.StreamConfig, src *jetstream.StreamSource, filter string) bool {
	if src.Consumer == nil {
		return Sources(cfg, src)
	}
	if d := durableSource(cfg); d != nil && copyFamily(d) == copyFamily(src) {
		return cfg.Metadata[MetaSourceFilter] == filter && SourceDomain(d) == SourceDomain(src)
	}
	plain := *src
	plain.Consumer, plain.FilterSubject = nil, filter
	return Sources(cfg, &plain)
}

// Sources reports whether cfg sources src (by name, filter and domain).
func Sources(cfg jetstream.StreamConfig, src *jetstream.StreamSource) bool {
	for _, s := range cfg.Sources {
		if s.Name != src.Name || s.FilterSubject != src.FilterSubject {
			continue
		}
		if s.Domain == src.Domain || (s.External != nil && s.External.APIPrefix == "$JS."+src.Domain+".API") {
			return true
		}
	}
	return false
}
