package fleet

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"

	"github.com/jetledger/jetledger/stream"
	"github.com/nats-io/nats.go/jetstream"
)

// Site is what a site needs at the hub (AddSite).
type Site struct {
	// Domain is the site's JetStream domain (run --edge-domain). Required.
	Domain string
	// Effects is the site's effects stream (run --effects-stream), which
	// the hub sources. Default "": the site sends no effects up.
	Effects string
	// HubEffects is the hub's effects stream that sources every site's.
	// Default HubEffectsDefault.
	HubEffects string
}

// HubEffectsDefault is the hub's effects stream of a Site without one.
const HubEffectsDefault = "EFFECTS"

var validName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// AddSite sets up at the hub, over js (a client of the hub), what site
// needs: the bucket of the sites' records, and the hub's effects stream
// sourcing the site's effects stream through its durable consumer
// (stream.HubEffectsSource). What is there already is left as it is, so
// running it again changes nothing; what it did is returned, one line
// each. A site whose effects the stream sources without a durable
// consumer is refused (ErrEphemeralSource): switching would copy them
// all again.
func AddSite(ctx context.Context, js jetstream.JetStream, s Site) ([]string, error) {
	if !validName.MatchString(s.Domain) || (s.Effects != "" && !validName.MatchString(s.Effects)) {
		return nil, fmt.Errorf("%w: domain %q, effects stream %q: want letters, digits, '-' and '_'", ErrInvalidSite, s.Domain, s.Effects)
	}
	var did []string
	_, err := js.KeyValue(ctx, Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		_, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: Bucket, History: 1, Storage: jetstream.FileStorage,
			Description: "created by jetledger: the latest status record of each edge site (jetledger fleet)"})
		if err == nil || errors.Is(err, jetstream.ErrBucketExists) {
			did = append(did, "created the bucket "+Bucket)
			err = nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("fleet: the bucket %s: %w", Bucket, err)
	}
	if s.Effects == "" {
		return did, nil
	}
	line, err := sourceEffects(ctx, js, s)
	if line != "" {
		did = append(did, line)
	}
	return did, err
}

// sourceEffects makes the hub's effects stream source the site's, adding
// the source to a stream that exists.
func sourceEffects(ctx context.Context, js jetstream.JetStream, s Site) (string, error) {
	name := s.HubEffects
	if name == "" {
		name = HubEffectsDefault
	}
	src := stream.HubEffectsSource(s.Domain, s.Effects)
	st, err := js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Sources: []*jetstream.StreamSource{src}, Storage: jetstream.FileStorage,
			Description: "created by jetledger: every site's effects, sourced from each site's effects stream"})
		if err != nil {
			return "", fmt.Errorf("fleet: create the hub's effects stream %s: %w", name, err)
		}
		return fmt.Sprintf("created the stream %s sourcing %s from the domain %s", name, s.Effects, s.Domain), nil
	}
	if err != nil {
		return "", fmt.Errorf("fleet: the hub's effects stream %s: %w", name, err)
	}
	cfg := st.CachedInfo().Config
	i := slices.IndexFunc(cfg.Sources, func(have *jetstream.StreamSource) bool {
		return have.Name == s.Effects && stream.SourceDomain(have) == s.Domain
	})
	switch {
	case i >= 0 && cfg.Sources[i].Consumer == nil:
		return "", fmt.Errorf("%w: %s sources %s from the domain %s ephemerally, which resumes 30-40 s after an outage; switching copies the site's effects again from the start: "+
			"to switch, remove that source (nats stream edit) and run jetledger hub again: the hub then copies the site's effects stream again from its start, which only a duplicate window covering them all dedupes", ErrEphemeralSource, name, s.Effects, s.Domain)
	case i >= 0:
		return "", nil
	}
	cfg.Sources = append(cfg.Sources, src)
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return "", fmt.Errorf("fleet: add the source %s@%s to %s: %w", s.Effects, s.Domain, name, err)
	}
	return fmt.Sprintf("added to the stream %s the source %s from the domain %s", name, s.Effects, s.Domain), nil
}
