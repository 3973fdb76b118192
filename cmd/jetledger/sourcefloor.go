package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

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
// [<identity>]", seq the message's sequence in the source and identity the
// source instance's (server/stream.go genSourceHeader, read back by its
// streamAndSeq).
const headerStreamSource = "Nats-Stream-Source"

// sourceOrigin is where a copied message came from.
type sourceOrigin struct {
	Stream   string // the source's name, with ":<hash>" of its API prefix when in another domain
	Seq      uint64 // its sequence in the source
	Identity string // the source instance's (streamIdentity); empty from a server that sends none
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
	if len(f) >= 6 {
		o.Identity = f[5]
	}
	return o, true
}

// from reports whether o names src's stream.
func (o sourceOrigin) from(src *jetstream.StreamSource) bool {
	return o.Stream == src.Name || strings.HasPrefix(o.Stream, src.Name+":")
}

// streamIdentity is nats-server's identity of a stream instance, a hash of
// its creation time (server/stream.go identity, events.go getHash). The
// sourcing server stamps it on every copy and checks it against the source
// when it resumes, between servers of any version, so it does not change;
// TestSourcedCopyNamesTheHubInstance holds it to a live server's.
func streamIdentity(created time.Time) string {
	const digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	sum := sha256.Sum256([]byte(created.UTC().Format(time.RFC3339Nano)))
	b := make([]byte, 8)
	for i := range b {
		b[i] = digits[int(sum[i]%byte(len(digits)))]
	}
	return string(b)
}

// sourceDomain is the JetStream domain src is read from ("" for this one).
func sourceDomain(src *jetstream.StreamSource) string {
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

// sourceKey names src in the ledger: the stream and its domain.
func sourceKey(src *jetstream.StreamSource) string {
	if d := sourceDomain(src); d != "" {
		return src.Name + "@" + d
	}
	return src.Name
}

// pruneBound is the sequence of stream s below which rows may be pruned,
// and for a stream that copies one source, the floor to record first: the
// source's sequence of the message at that sequence. When that cannot be
// read (the copy is empty, or its first message does not name the source),
// it is 0: which of the source's messages the rows came from is unknown,
// so none goes. A stream that copies none, or several (whose order across
// sources nothing keeps), is pruned below its first sequence as before.
func pruneBound(ctx context.Context, s jetstream.Stream, info *jetstream.StreamInfo) (uint64, *ledger.SourceFloor, error) {
	if len(info.Config.Sources) != 1 {
		return info.State.FirstSeq, nil, nil
	}
	src := info.Config.Sources[0]
	if info.State.Msgs == 0 {
		return 0, nil, nil
	}
	// The first message at or after the first sequence: it may have gone
	// since the stream's state was read.
	m, err := s.GetMsg(ctx, info.State.FirstSeq, jetstream.WithGetMsgSubject(">"))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, fmt.Errorf("prune: first message of stream %s: %w", info.Config.Name, err)
	}
	o, ok := parseStreamSource(m.Header.Get(headerStreamSource))
	if !ok || !o.from(src) {
		return 0, nil, nil
	}
	return m.Sequence, &ledger.SourceFloor{Source: sourceKey(src), Instance: o.Identity, Below: o.Seq}, nil
}

// sourceStart is the sequence of src at which a new copy named stream
// starts: the floor prune recorded, when src is the instance it recorded it
// for; 0 (the source's start) without a floor or for another instance,
// whose messages are all new. The ledger's rows of stream are then held
// (ledger.HoldRows) to the last sequence at which the new copy, numbering
// from 1, can hold a copy of one of theirs: their sequences in the copy
// before mean nothing in this one. Which instance src is, and how far it
// goes, only its server can say, so with a floor or rows the call waits for
// it (logged) until ctx ends: a guess would either apply pruned messages
// again or skip a new instance's first ones, and until the copy exists
// there is nothing to process. A new site, with neither, asks nothing and
// starts offline.
func sourceStart(ctx context.Context, js jetstream.JetStream, stream string, src *jetstream.StreamSource, st *ledger.Store, log *slog.Logger) (uint64, error) {
	f, err := st.SourceFloor(ctx, stream, sourceKey(src))
	floored := err == nil
	if err != nil && !errors.Is(err, ledger.ErrNotFound) {
		return 0, err
	}
	rows, err := st.RowsOf(ctx, stream)
	if err != nil || (!floored && rows == 0) {
		return 0, err
	}
	hub := js
	if d := sourceDomain(src); d != "" {
		if hub, err = jetstream.NewWithDomain(js.Conn(), d); err != nil {
			return 0, err
		}
	}
	info, err := jsretry.Call(ctx, log, "look up the source "+sourceKey(src)+" of stream "+stream, func(ctx context.Context) (*jetstream.StreamInfo, error) {
		s, err := hub.Stream(ctx, src.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return s.CachedInfo(), nil
	})
	switch {
	case err != nil:
		return 0, err
	case info == nil:
		// Made later, it is another instance, and holds no copy of a row.
		return 0, nil
	}
	var start uint64
	if floored {
		same := f.Instance == streamIdentity(info.Created)
		if f.Instance == "" {
			// A server that names no instance: one made after the floor was
			// recorded is surely another.
			same = !info.Created.After(f.Since)
		}
		if same {
			start = f.Below
		} else {
			log.InfoContext(ctx, "the source was made again since the ledger pruned: the stream copies it from its start",
				"stream", stream, "source", sourceKey(src), "source_created", info.Created)
		}
	}
	// Every id the ledger holds came before the source's last message now,
	// and the copy takes the source's messages in order from its start.
	if from := max(start, info.State.FirstSeq, 1); rows > 0 && info.State.LastSeq >= from {
		if _, err := st.HoldRows(ctx, stream, info.State.LastSeq-from+1); err != nil {
			return 0, err
		}
	}
	return start, nil
}
