package stream

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/consumer/jsretry"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// An edge's stream copies (sources) the hub's and keeps less of it, so
// prune removes rows whose messages the hub still holds. A copy made again
// (deleted by an operator, or the embedded store lost while the ledger
// survived) would copy the hub's history from its start and apply those
// messages a second time. So before prune removes rows it records, in the
// ledger, the hub's sequence they came from below (sourcing keeps the hub's
// order), and a copy made again starts there. What follows reads that
// sequence from the copies and decides the start; none of it depends on
// the command line.

// headerStreamSource is the header nats-server puts on each message it
// copies from a source: "<stream> <seq> <filter> <transform> <subject>
// [<identity>]", seq the message's sequence in the source, stream, filter
// and transform the source's index name (which of a stream's sources it
// is) and identity the source instance's (server/stream.go
// genSourceHeader, read back by its streamAndSeq).
const headerStreamSource = "Nats-Stream-Source"

// pruneScanLimit bounds the messages read to find one source's first
// message at or after a sequence: a source quiet for longer than that in a
// stream that copies several gives no floor, and nothing is pruned.
const pruneScanLimit = 4096

// sourceOrigin is where a copied message came from.
type sourceOrigin struct {
	Stream   string // the source's name, with ":<hash>" of its API prefix when in another domain
	Seq      uint64 // its sequence in the source
	IName    string // the source's index name, "<stream> <filter> <transform>"; empty in the short form
	Identity string // the source instance's (Identity); empty from a server that sends none
}

// parseStreamSource reads a Nats-Stream-Source header. The form before
// nats-server 2.10 (an ack reply subject) is not read: ok is false.
func parseStreamSource(h string) (o sourceOrigin, ok bool) {
	f := strings.Split(h, " ")
	if len(f) < 2 || f[0] == "" || strings.HasPrefix(f[0], "$JS.ACK.") {
		return sourceOrigin{}, false
	}
	seq, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil || seq == 0 {
		return sourceOrigin{}, false
	}
	o = sourceOrigin{Stream: f[0], Seq: seq}
	if len(f) >= 4 {
		o.IName = f[0] + " " + f[2] + " " + f[3]
	}
	if len(f) >= 6 {
		o.Identity = f[5]
	}
	return o, true
}

// of reports whether o came through the source whose index name is iname
// (sourceIName).
func (o sourceOrigin) of(iname string) bool {
	if o.IName != "" {
		return o.IName == iname
	}
	name, _, _ := strings.Cut(iname, " ")
	return o.Stream == name
}

// natsHash is nats-server's short hash of a name (server/events.go
// getHash): of a stream's creation time it is the instance's identity, of
// an API prefix it tells sources of one name in two domains apart.
func natsHash(s string) string {
	const digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	sum := sha256.Sum256([]byte(s))
	b := make([]byte, 8)
	for i := range b {
		b[i] = digits[int(sum[i]%byte(len(digits)))]
	}
	return string(b)
}

// Identity is nats-server's identity of a stream instance, a hash of
// its creation time (server/stream.go identity). The sourcing server stamps
// it on every copy and checks it against the source when it resumes,
// between servers of any version, so it does not change;
// TestSourcedCopyNamesTheHubInstance holds it to a live server's.
func Identity(created time.Time) string {
	return natsHash(created.UTC().Format(time.RFC3339Nano))
}

// sourceIName is the index name nats-server gives src among a stream's
// sources (server/stream.go composeIName), which the copies' header
// carries: sources of one stream with other filters are other sources,
// each in its own order.
func sourceIName(src *jetstream.StreamSource) string {
	name := src.Name
	switch {
	case src.External != nil:
		name += ":" + natsHash(src.External.APIPrefix)
	case src.Domain != "":
		name += ":" + natsHash("$JS."+src.Domain+".API")
	}
	if src.Consumer != nil {
		name += ":C=" + natsHash(src.Consumer.Name)
	}
	filter, dest := cmp.Or(src.FilterSubject, ">"), ">"
	if len(src.SubjectTransforms) > 0 {
		var fs, ds []string
		for _, tr := range src.SubjectTransforms {
			fs, ds = append(fs, cmp.Or(tr.Source, ">")), append(ds, cmp.Or(tr.Destination, ">"))
		}
		filter, dest = strings.Join(fs, "\f"), strings.Join(ds, "\f")
	}
	return name + " " + filter + " " + dest
}

// SourceDomain is the JetStream domain src is read from ("" for this one).
func SourceDomain(src *jetstream.StreamSource) string {
	if src.Domain != "" || src.External == nil {
		return src.Domain
	}
	if d, ok := strings.CutPrefix(src.External.APIPrefix, "$JS."); ok {
		if d, ok := strings.CutSuffix(d, ".API"); ok {
			return d
		}
	}
	return src.External.APIPrefix
}

// SourceJetStream is JetStream where the stream src names lives, over js's
// connection: in src's domain, or through its API prefix; js itself for a
// source in js's own.
func SourceJetStream(js jetstream.JetStream, src *jetstream.StreamSource) (jetstream.JetStream, error) {
	switch {
	case src.Domain != "":
		return jetstream.NewWithDomain(js.Conn(), src.Domain)
	case src.External != nil && src.External.APIPrefix != "":
		return jetstream.NewWithAPIPrefix(js.Conn(), src.External.APIPrefix)
	}
	return js, nil
}

// sourceKey names src in the ledger: the stream and its domain. Sources of
// one stream with other filters share it.
func sourceKey(src *jetstream.StreamSource) string {
	if d := SourceDomain(src); d != "" {
		return src.Name + "@" + d
	}
	return src.Name
}

// firstFrom is stream s's first message at or after seq that came through
// src, and where in src it came from; 0 when none is found within
// pruneScanLimit reads (or the stream holds none).
func firstFrom(ctx context.Context, s jetstream.Stream, seq uint64, src *jetstream.StreamSource) (uint64, sourceOrigin, error) {
	subject := ">"
	if src.FilterSubject != "" && len(src.SubjectTransforms) == 0 {
		subject = src.FilterSubject // its copies keep their subjects: skip the others' messages
	}
	iname := sourceIName(src)
	for range pruneScanLimit {
		m, err := s.GetMsg(ctx, max(seq, 1), jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return 0, sourceOrigin{}, nil
		}
		if err != nil {
			return 0, sourceOrigin{}, fmt.Errorf("stream %s: message at or after %d: %w", s.CachedInfo().Config.Name, seq, err)
		}
		if o, ok := parseStreamSource(m.Header.Get(headerStreamSource)); ok && o.of(iname) {
			return m.Sequence, o, nil
		}
		seq = m.Sequence + 1
	}
	return 0, sourceOrigin{}, nil
}

// PruneBound is the sequence of stream s below which rows may be pruned,
// and for a stream that copies others, the floors to record first: for
// each source, its sequence of its first message in s at or after the
// stream's first sequence. Sourcing keeps each source's order, none across
// them, so every message of a source below that message came from below
// its floor. When one source's floor cannot be read (the copy is empty, or
// holds no message of it near enough), it is 0: which of that source's
// messages the rows came from is unknown, so none goes. Sources of one
// stream (by other filters) share a floor, the highest: a copy made again
// from there takes none of their pruned messages again. A stream that
// copies none is pruned below its first sequence.
func PruneBound(ctx context.Context, s jetstream.Stream, info *jetstream.StreamInfo) (uint64, []ledger.SourceFloor, error) {
	if len(info.Config.Sources) == 0 {
		return info.State.FirstSeq, nil, nil
	}
	if info.State.Msgs == 0 {
		return 0, nil, nil
	}
	bound := uint64(math.MaxUint64)
	floors := map[string]ledger.SourceFloor{}
	for _, src := range info.Config.Sources {
		// The first message at or after the first sequence: some may have
		// gone since the stream's state was read.
		seq, o, err := firstFrom(ctx, s, info.State.FirstSeq, src)
		if err != nil {
			return 0, nil, fmt.Errorf("stream: prune bound: %w", err)
		}
		if seq == 0 {
			return 0, nil, nil
		}
		bound = min(bound, seq)
		k := sourceKey(src)
		f, seen := floors[k]
		switch {
		case !seen:
			floors[k] = ledger.SourceFloor{Source: k, Instance: o.Identity, Below: o.Seq}
		case f.Instance != o.Identity:
			return 0, nil, nil // the source made again between them: neither floor holds for both
		default:
			f.Below = max(f.Below, o.Seq)
			floors[k] = f
		}
	}
	out := make([]ledger.SourceFloor, 0, len(floors))
	for _, f := range floors {
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b ledger.SourceFloor) int { return strings.Compare(a.Source, b.Source) })
	return bound, out, nil
}

// hubStream is the info of src's stream where src reads it, nil when it
// does not exist. Only its server can say which instance it is and how far
// it goes, so the call waits for it (logged) until ctx ends.
func hubStream(ctx context.Context, js jetstream.JetStream, stream string, src *jetstream.StreamSource, log *slog.Logger) (*jetstream.StreamInfo, error) {
	hub, err := SourceJetStream(js, src)
	if err != nil {
		return nil, err
	}
	return jsretry.Call(ctx, log, "look up the source "+sourceKey(src)+" of stream "+stream, func(ctx context.Context) (*jetstream.StreamInfo, error) {
		s, err := hub.Stream(ctx, src.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return s.CachedInfo(), nil
	})
}

// floorOf reports whether f was recorded for the instance info is.
func floorOf(f ledger.SourceFloor, info *jetstream.StreamInfo) bool {
	if f.Instance == "" {
		// A server that names no instance (or a floor recorded before the
		// copy had any message): one made after the floor is surely another.
		return !info.Created.After(f.Since)
	}
	return f.Instance == Identity(info.Created)
}

// copies is how many of src's messages a copy starting at start can take:
// a copy of an id the ledger holds may come at any of as many sequences.
func copies(src *jetstream.StreamInfo, start uint64) uint64 {
	if from := max(start, src.State.FirstSeq, 1); src.State.LastSeq >= from {
		return src.State.LastSeq - from + 1
	}
	return 0
}

// sourceStart is the sequence of src at which a new copy named stream
// starts: the floor the ledger recorded, when src is the instance it
// recorded it for; startSeq (Sourced.Start; 0 is the source's start)
// without a floor, or 0 for another instance, whose messages are all new.
// A copy whose ledger has applied messages of it but has no floor at all
// (pruned by a release that recorded none) is refused (ErrNoFloor)
// unless startSeq says where: from its start it would apply what that
// release pruned again, and only a person can say where that ends. A start
// without a floor is recorded as the copy's floor, so a copy lost before
// any prune does not look like that. The ledger's rows of stream are then
// held (ledger.HoldRows) to the last sequence at which the new copy,
// numbering from 1, can hold a copy of one of theirs: their sequences in
// the copy before mean nothing in this one. With rows or a floor the call
// waits for the hub (hubStream): a guess would either apply pruned messages
// again or skip a new instance's first ones, and until the copy exists
// there is nothing to process. A new site asks nothing and starts offline.
func sourceStart(ctx context.Context, js jetstream.JetStream, stream string, src *jetstream.StreamSource, startSeq uint64, st *ledger.Store, log *slog.Logger, names map[string]string) (uint64, error) {
	f, err := st.SourceFloor(ctx, stream, sourceKey(src))
	floored := err == nil
	if err != nil && !errors.Is(err, ledger.ErrNotFound) {
		return 0, err
	}
	rows, err := st.RowsOf(ctx, stream)
	if err != nil {
		return 0, err
	}
	if !floored {
		if err := requireFloors(ctx, st, stream, src, rows, startSeq, names); err != nil {
			return 0, err
		}
	}
	var info *jetstream.StreamInfo
	if floored || rows > 0 {
		if info, err = hubStream(ctx, js, stream, src, log); err != nil {
			return 0, err
		}
	}
	start := startSeq
	switch {
	case info == nil && floored:
		// Made later, it is another instance, and holds no copy of a row.
		start = 0
	case floored && floorOf(f, info):
		start = f.Below
	case floored:
		start = 0
		log.InfoContext(ctx, "the source was made again since the ledger pruned: the stream copies it from its start",
			"stream", stream, "source", sourceKey(src), "source_created", info.Created)
	}
	if !floored {
		nf := ledger.SourceFloor{Source: sourceKey(src), Below: max(start, 1)}
		if info != nil {
			nf.Instance = Identity(info.Created)
		}
		if err := st.RaiseSourceFloors(ctx, stream, []ledger.SourceFloor{nf}); err != nil {
			return 0, err
		}
	}
	// Every id the ledger holds came before the source's last message now,
	// and the copy takes the source's messages in order from its start.
	if rows > 0 && info != nil {
		if n := copies(info, start); n > 0 {
			if _, err := st.HoldRows(ctx, stream, n); err != nil {
				return 0, err
			}
		}
	}
	return start, nil
}

// requireFloors refuses (*NoFloorError) to make a copy of src again for
// a ledger that has served stream but holds no floor of it at all, unless
// startSeq says where to start: this release records a floor when it
// creates a copy, at every start and before every prune, so only a ledger
// pruned by an earlier release has none, and what it pruned is unknown.
func requireFloors(ctx context.Context, st *ledger.Store, stream string, src *jetstream.StreamSource, rows int64, startSeq uint64, names map[string]string) error {
	if startSeq > 0 {
		return nil
	}
	fs, err := st.SourceFloors(ctx, stream)
	if err != nil || len(fs) > 0 {
		return err
	}
	served := rows > 0
	if !served {
		cs, err := st.Consumers(ctx)
		if err != nil {
			return err
		}
		served = slices.ContainsFunc(cs, func(c ledger.Consumer) bool { return c.Stream == stream })
	}
	if !served {
		return nil
	}
	return &NoFloorError{Stream: stream, Rows: rows, Source: sourceKey(src), Hub: src.Name, Names: names}
}

// adoptSourced checks a copy that exists when run starts (info): one run
// did not create (another instance than the one the ledger served) is
// refused (ErrBelowFloor) where it copies a source from below the
// floor the ledger recorded for it, since it takes the pruned messages
// again; run's own copy started at or above it. Then the floors are
// recorded from the copy as prune would (so that a ledger an earlier
// release pruned has them before the copy can be lost), and for a new
// instance the ledger's rows are held as for a copy run makes.
func adoptSourced(ctx context.Context, js jetstream.JetStream, st *ledger.Store, info *jetstream.StreamInfo, log *slog.Logger) error {
	name := info.Config.Name
	s, err := js.Stream(ctx, name)
	if err != nil {
		return fmt.Errorf("stream %s: %w", name, err)
	}
	served, err := ServedInstance(ctx, st, name)
	if err != nil {
		return err
	}
	mine := served == consumer.StreamInstance(name, info.Created)
	if !mine {
		for _, src := range info.Config.Sources {
			if err := checkSourceStart(ctx, js, st, s, info, src, log); err != nil {
				return err
			}
		}
	}
	_, floors, err := PruneBound(ctx, s, info)
	if err != nil {
		return err
	}
	if err := st.RaiseSourceFloors(ctx, name, floors); err != nil {
		return err
	}
	rows, err := st.RowsOf(ctx, name)
	if err != nil || mine || served == "" || rows == 0 {
		// A ledger that names no instance (an earlier release's) cannot
		// tell its own copy from another: it is taken as its own.
		return err
	}
	n := info.State.LastSeq
	for _, src := range info.Config.Sources {
		hub, err := hubStream(ctx, js, name, src, log)
		if err != nil {
			return err
		}
		if hub != nil {
			n += copies(hub, startOf(info.Config, src))
		}
	}
	_, err = st.HoldRows(ctx, name, n)
	return err
}

// checkSourceStart refuses (ErrBelowFloor) copy s when it copies src
// from below the floor the ledger recorded for src's instance: by the
// source's sequence of its first message of src, or, with none to read,
// by its start position and the hub's instance.
func checkSourceStart(ctx context.Context, js jetstream.JetStream, st *ledger.Store, s jetstream.Stream, info *jetstream.StreamInfo, src *jetstream.StreamSource, log *slog.Logger) error {
	name := info.Config.Name
	f, err := st.SourceFloor(ctx, name, sourceKey(src))
	if errors.Is(err, ledger.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	seq, o, err := firstFrom(ctx, s, info.State.FirstSeq, src)
	if err != nil {
		return err
	}
	from := startOf(info.Config, src)
	switch {
	case seq > 0 && o.Identity != "" && f.Instance != "" && o.Identity != f.Instance:
		return nil // another instance of the source: its messages are all new
	case seq > 0:
		from = o.Seq // in order from there
	case from >= f.Below && src.OptStartTime == nil:
	default:
		hub, err := hubStream(ctx, js, name, src, log)
		if err != nil || hub == nil || !floorOf(f, hub) {
			return err
		}
		if src.OptStartTime != nil {
			from = 0 // by time: nothing says which sequence
		}
	}
	if from >= f.Below {
		return nil
	}
	at := "its start"
	if from > 0 {
		at = "its sequence " + strconv.FormatUint(from, 10)
	}
	return fmt.Errorf("%w: stream %s, which jetledger did not create, copies %s from %s, and this ledger pruned the rows of its messages below %d, which it would apply a second time: "+
		"delete the stream and let run create it (it starts at %d), or create it with that source's start sequence at %d",
		ErrBelowFloor, name, sourceKey(src), at, f.Below, f.Below, f.Below)
}
