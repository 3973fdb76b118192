package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
)

// Durable sourcing (nats-server ADR-60): a source that names a durable
// consumer on the other side resumes within seconds after an outage. The
// server asks that consumer to reset and waits 5 s for it, and a probe on
// its deliver subject ends the backoff at its first heartbeat. An ephemeral
// source waits 30 s for a new consumer, then backs off 10 s, so after a
// hub restart an edge took 33-40 s to get new messages in either direction.
// The filter and start position are on the consumer: a source with a
// consumer may not have them (error 10215). jetledger keeps them in the
// copy's metadata as well, where the checks of its start read them.
const (
	// MetaSourceFilter is the copy's metadata key holding the hub filter
	// of its durable source.
	MetaSourceFilter = "jetledger.source_filter"
	// MetaSourceStart is the copy's metadata key holding the hub sequence
	// its durable source's consumer starts at ("0": the start).
	MetaSourceStart = "jetledger.source_start"
	// consumerPrefix starts the names of the consumers jetledger makes for
	// durable sources.
	consumerPrefix = "jetledger_"
	// deliverPrefix starts their deliver subjects: one per consumer, so
	// that sites never share one (the hub would take both into one copy).
	deliverPrefix = "_JETLEDGER.src."
)

// HubEffectsConsumer is the durable consumer on an edge's effects stream
// that the hub's effects stream sources it through (HubEffectsSource).
const HubEffectsConsumer = consumerPrefix + "hub"

// HubEffectsSource is how the hub's effects stream sources site's effects
// stream (in the site's JetStream domain): through the durable consumer
// HubEffectsConsumer, which the site's run creates on its stream
// (EnsureEffects with Effects.Site), with a deliver subject of the site's.
func HubEffectsSource(site, stream string) *jetstream.StreamSource {
	return &jetstream.StreamSource{Name: stream, Domain: site, Consumer: &jetstream.StreamConsumerSource{
		Name: HubEffectsConsumer, DeliverSubject: deliverPrefix + "effects." + site + "." + stream}}
}

// sourceConsumerConfig is the durable consumer a durable source reads
// through: flow-controlled, with a heartbeat each second, as the server
// requires of one (error 10218-10222); the filter and start are the
// source's.
func sourceConsumerConfig(src *jetstream.StreamSource, filter string, start uint64, about string) jetstream.ConsumerConfig {
	cfg := jetstream.ConsumerConfig{Durable: src.Consumer.Name, DeliverSubject: src.Consumer.DeliverSubject, FilterSubject: filter,
		AckPolicy: jetstream.AckFlowControlPolicy, FlowControl: true, IdleHeartbeat: time.Second,
		Description: "created by jetledger: the durable source of " + about + "; delete it only with the stream that sources through it"}
	if start > 1 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, start
	}
	return cfg
}

// newCopySource is the durable source of a new copy named stream at site,
// of the hub's stream hub in domain: a consumer of its own, so that a copy
// made again never resumes where an earlier one stopped.
func newCopySource(hub, domain, site, stream string) *jetstream.StreamSource {
	id := strings.ToLower(ulid.Make().String())
	return &jetstream.StreamSource{Name: hub, Domain: domain, Consumer: &jetstream.StreamConsumerSource{
		Name: copyConsumerPrefix(site, stream) + id, DeliverSubject: deliverPrefix + "copy." + site + "." + stream + "." + id}}
}

// copyConsumerPrefix starts the names of the consumers of site's copies
// named stream, one per copy made. Both names may hold '_', so the pair's
// hash goes in too: site a's copy b_c and site a_b's copy c must not
// share a prefix, or one would delete the other's consumer as its own
// earlier copy's.
func copyConsumerPrefix(site, stream string) string {
	return consumerPrefix + site + "_" + stream + "_" + natsHash(site+"\x00"+stream) + "_"
}

// copyFamily is the prefix of a durable source's consumer name, or "" for
// a source jetledger did not name.
func copyFamily(src *jetstream.StreamSource) string {
	if src.Consumer == nil || !strings.HasPrefix(src.Consumer.Name, consumerPrefix) {
		return ""
	}
	i := strings.LastIndexByte(src.Consumer.Name, '_')
	return src.Consumer.Name[:i+1]
}

// startOf is the sequence a source of cfg starts at: its own, or, for a
// durable source, its consumer's as the copy's metadata records it.
func startOf(cfg jetstream.StreamConfig, src *jetstream.StreamSource) uint64 {
	if src.Consumer == nil {
		return src.OptStartSeq
	}
	n, _ := strconv.ParseUint(cfg.Metadata[MetaSourceStart], 10, 64)
	return n
}

// durableSource is the copy's durable source jetledger made, nil if none.
func durableSource(cfg jetstream.StreamConfig) *jetstream.StreamSource {
	for _, src := range cfg.Sources {
		if copyFamily(src) != "" {
			return src
		}
	}
	return nil
}

// EnsureHubConsumer creates, on the hub, the consumer the durable source
// of copy info reads through, if it is missing, and deletes those of the
// site's earlier copies of the same name. A consumer made for a copy that
// exists starts after the last message the copy took from the hub's
// stream, or at the start of a hub stream made again since (another
// instance, whose messages are all new: the ledger dedupes the ids it
// holds); for a copy not made yet (info.Created zero) it starts where the
// copy's metadata says. It needs the hub: over a link that is down it
// fails with the request's error. A copy without a durable source
// jetledger made needs none (nil).
func EnsureHubConsumer(ctx context.Context, js jetstream.JetStream, info *jetstream.StreamInfo) error {
	if !info.Created.IsZero() {
		// The copy's source as it is now: a consumer made again renames it.
		s, err := js.Stream(ctx, info.Config.Name)
		if err != nil {
			return fmt.Errorf("stream %s: %w", info.Config.Name, err)
		}
		info = s.CachedInfo()
	}
	src := durableSource(info.Config)
	if src == nil {
		return nil
	}
	hub, err := SourceJetStream(js, src)
	if err != nil {
		return err
	}
	s, err := hub.Stream(ctx, src.Name)
	if err != nil {
		return fmt.Errorf("stream %s: the hub's stream %s: %w", info.Config.Name, src.Name, err)
	}
	_, err = hub.PushConsumer(ctx, src.Name, src.Consumer.Name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		src, err = createHubConsumer(ctx, js, hub, info, src, s.CachedInfo())
	}
	if err != nil {
		return err
	}
	names := s.ConsumerNames(ctx)
	family := copyFamily(src)
	for name := range names.Name() {
		if strings.HasPrefix(name, family) && name != src.Consumer.Name {
			// An earlier copy's: nothing sources through it any more, and
			// its deliveries would go on for ever.
			if err := s.DeleteConsumer(ctx, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
				return err
			}
		}
	}
	return names.Err()
}

// createHubConsumer makes the copy's missing consumer on the hub's stream
// (hubInfo), starting as EnsureHubConsumer says, and returns the source
// that reads through it. For a copy that exists it is a consumer of a new
// name, and the copy's source is changed to it: the sourcing server keeps
// the last sequence a source took and drops what comes below it, so the
// same source would drop the first messages of a hub stream made again.
// A new name is a new source, which starts where its consumer does.
func createHubConsumer(ctx context.Context, js, hub jetstream.JetStream, info *jetstream.StreamInfo, src *jetstream.StreamSource, hubInfo *jetstream.StreamInfo) (*jetstream.StreamSource, error) {
	start, err := resumeAt(ctx, js, info, src, hubInfo)
	if err != nil {
		return nil, err
	}
	if !info.Created.IsZero() {
		src = renamed(src)
	}
	cfg := sourceConsumerConfig(src, info.Config.Metadata[MetaSourceFilter], start, "the copy "+info.Config.Name)
	if _, err := hub.CreatePushConsumer(ctx, src.Name, cfg); err != nil && !errors.Is(err, jetstream.ErrConsumerExists) {
		return nil, fmt.Errorf("stream %s: create the consumer %s on the hub's stream %s: %w", info.Config.Name, cfg.Durable, src.Name, err)
	}
	if info.Created.IsZero() {
		return src, nil
	}
	sc := info.Config
	sc.Sources = slices.Clone(sc.Sources)
	for i, have := range sc.Sources {
		if copyFamily(have) == copyFamily(src) {
			sc.Sources[i] = src
		}
	}
	sc.Metadata = maps.Clone(sc.Metadata)
	sc.Metadata[MetaSourceStart] = strconv.FormatUint(start, 10)
	if _, err := js.UpdateStream(ctx, sc); err != nil {
		return nil, fmt.Errorf("stream %s: source the hub's stream through the new consumer %s: %w", info.Config.Name, cfg.Durable, err)
	}
	return src, nil
}

// renamed is src through a consumer of a new name in its family.
func renamed(src *jetstream.StreamSource) *jetstream.StreamSource {
	id := strings.ToLower(ulid.Make().String())
	d := src.Consumer.DeliverSubject
	out := *src
	out.Consumer = &jetstream.StreamConsumerSource{Name: copyFamily(src) + id, DeliverSubject: d[:strings.LastIndexByte(d, '.')+1] + id}
	return &out
}

// resumeAt is where a new consumer of copy info's source src starts on
// the hub's stream hubInfo (0: its start).
func resumeAt(ctx context.Context, js jetstream.JetStream, info *jetstream.StreamInfo, src *jetstream.StreamSource, hubInfo *jetstream.StreamInfo) (uint64, error) {
	if info.Created.IsZero() {
		return startOf(info.Config, src), nil // the copy is being made
	}
	s, err := js.Stream(ctx, info.Config.Name)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", info.Config.Name, err)
	}
	o, found, err := lastFrom(ctx, s, src)
	switch {
	case err != nil:
		return 0, err
	case found && o.Identity != "" && o.Identity != Identity(hubInfo.Created):
		return 0, nil // the hub's stream was made again since
	case found:
		return o.Seq + 1, nil
	case hubInfo.Created.After(info.Created):
		return 0, nil // made again after the copy, which holds nothing of it
	}
	return startOf(info.Config, src), nil
}

// lastFrom is where the last message of stream s that came through src
// came from, found among its last pruneScanLimit messages.
func lastFrom(ctx context.Context, s jetstream.Stream, src *jetstream.StreamSource) (sourceOrigin, bool, error) {
	info, err := s.Info(ctx)
	if err != nil {
		return sourceOrigin{}, false, err
	}
	iname := sourceIName(src)
	for seq, n := info.State.LastSeq, 0; seq >= max(info.State.FirstSeq, 1) && n < pruneScanLimit; seq, n = seq-1, n+1 {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // deleted
		}
		if err != nil {
			return sourceOrigin{}, false, err
		}
		if o, ok := parseStreamSource(m.Header.Get(headerStreamSource)); ok && o.of(iname) {
			return o, true, nil
		}
	}
	return sourceOrigin{}, false, nil
}

// hubConsumerCheck is how often KeepHubConsumer looks again at a
// consumer that is there: the hub's stream made again (or the consumer
// deleted) takes it away, and the copy would take nothing more.
var hubConsumerCheck = 10 * time.Second

// KeepHubConsumer calls EnsureHubConsumer until ctx ends: every
// hubConsumerCheck while it succeeds, spaced out while it fails (the hub
// away). A copy made offline gets its consumer once the link is up, one
// whose hub stream is made again gets a new one, and its source resumes at
// the consumer's first heartbeat. It logs the first failure and each new
// one, and the success after any.
func KeepHubConsumer(ctx context.Context, js jetstream.JetStream, info *jetstream.StreamInfo, log *slog.Logger) {
	if durableSource(info.Config) == nil {
		return
	}
	backoff := ackwait.Backoff{Base: time.Second, Max: 15 * time.Second}
	last := ""
	for try := 1; ; try++ {
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := EnsureHubConsumer(tctx, js, info)
		cancel()
		wait := func() bool { return backoff.Wait(ctx, try) }
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			if last != "" {
				log.InfoContext(ctx, "the copy's consumer is on the hub: sourcing goes on", "stream", info.Config.Name)
			}
			last, try = "", 0
			wait = func() bool { return ackwait.Sleep(ctx, hubConsumerCheck) }
		case err.Error() != last:
			last = err.Error()
			level := slog.LevelWarn
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoHeartbeat) {
				level = slog.LevelDebug // the link is down: its watch says so
			}
			log.Log(ctx, level, "the copy's consumer on the hub could not be checked or made; trying again, and while it is missing the copy takes nothing new", "stream", info.Config.Name, "err", err)
		}
		if !wait() {
			return
		}
	}
}
