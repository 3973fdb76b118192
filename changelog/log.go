package changelog

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jetledger/jetledger/consumer/jsretry"
	"github.com/jetledger/jetledger/ledger"
	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
)

// Headers of a changelog entry. A transaction's changes too large for one
// message are split over consecutive messages, each naming the first's
// sequence and the count; a standby applies them once all are in. A
// message whose changes are compressed says how in HeaderEncoding (only
// EncodingS2); one without it holds them as they are.
const (
	HeaderFirst    = "Jetledger-Entry-First"
	HeaderParts    = "Jetledger-Entry-Parts"
	HeaderEncoding = "Jetledger-Entry-Encoding"
	// HeaderBegun on a log's first entry says what its owner began it
	// from: BegunEmpty, a ledger with nothing in it, which a new copy is,
	// so it may follow the log from there (the lifecycle's "no ledger yet,
	// a log begun from none"). In the entry itself, it lands only with the
	// entry, fenced as it is: no late word can say it of another's log.
	HeaderBegun = "Jetledger-Log-Begun-From"
	BegunEmpty  = "empty"
	EncodingS2  = "s2"
)

// MaxEntryDefault is the most bytes of changes one message carries, well
// inside a server's default 1 MiB max_payload with the headers.
const MaxEntryDefault = 512 << 10

// Holds says whether a ledger holds the message of id at stream sequence
// seq (ledger.HoldsQuery).
type Holds func(ctx context.Context, id string, seq uint64) (bool, error)

// Config names a partition's changelog.
type Config struct {
	// Stream and Durable name the partition consumed (the stream and the
	// partition's durable). Required.
	Stream, Durable string
	// Replicas of the changelog stream and the lease bucket. Default 1; 3
	// on a cluster, so the log outlives a server.
	Replicas int
	// MaxEntry is the most bytes of changes per message. Default
	// MaxEntryDefault.
	MaxEntry int
	// Timeout bounds one publish of an entry. Default 5s.
	Timeout time.Duration
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Acked returns the stream sequence of a message the partition's
	// durable has acknowledged that a ledger lacks, or 0 when there is
	// none (or it cannot tell): such a ledger does not begin a log. The
	// ledger has seen messages through stream sequence seen, and holds
	// says whether it holds a message (its Nats-Msg-Id, its sequence).
	// Default nil: not checked.
	Acked func(ctx context.Context, seen uint64, holds Holds) (uint64, error)
	// Schema, if set, is run on a standby's copy each time it is opened,
	// before it follows the log: a schema's statements (DDL) are in no
	// entry, so the tables a later version of the owner writes must be
	// made on the standby first (upgrade standbys first). It must be
	// idempotent, as the owner runs it at each start too. Default nil.
	Schema func(context.Context, *ledger.Store) error
	// Copy, if set, is told of a standby's copy each time it is opened,
	// after Schema, and its stop is called before the copy closes: a run
	// serves reads of it (its admin API). Default nil.
	Copy func(context.Context, *ledger.Store) (stop func())
	// Waiting is told each time a host's copy waits, why (an error
	// wrapping ErrWaiting), and nil once it goes on: for its health and
	// metrics. Default nil.
	Waiting func(error)
	// MayTake, if set, is asked before a standby takes a lease nobody
	// holds: a group's member takes only the partitions assigned to it,
	// and follows the others' logs. Default nil: any free lease is taken.
	MayTake func() bool
	// Roles keeps the run's role in the partition's lifecycle (the table
	// of moves), across the logs it opens, and refuses a move the table
	// lacks. Default nil: moves are not kept (a test that plays two hosts
	// with one Log).
	Roles *Roles
}

// Log is a partition's changelog: a stream of its own holding one subject,
// written by the partition's owner only. Every entry is published with
// Nats-Expected-Last-Sequence naming the entry the writer has applied last,
// so an entry of a writer that is not up to date (a zombie owner, paused
// while another took over) is refused by the stream, and the ledger rolls
// its transaction back. It implements ledger.Changelog.
type Log struct {
	js       jetstream.JetStream
	cfg      Config
	name     string
	subject  string
	instance string
	log      *slog.Logger

	// beginEmpty: the store about to take this log over begins it from
	// a ledger with nothing in it (Own), said on entry 1 (HeaderBegun).
	// Under lastMu.
	beginEmpty bool

	readMu sync.Mutex // one catch-up at a time reads rd
	rd     *reader

	// lastMu guards the last part this Log wrote or read of its instance:
	// Append expects the stream's last message to be it, so a stream made
	// again under the log's name, whose last entry has the number this
	// writer expects, still refuses it (lastID).
	lastMu  sync.Mutex
	lastSeq uint64
	lastID  string
}

var _ ledger.Changelog = (*Log)(nil)

// nameSafe turns the characters a stream name, subject token or KV key
// may not hold into '_'.
var nameSafe = strings.NewReplacer(".", "_", "*", "_", ">", "_", " ", "_")

// Names returns the stream and the subject of a partition's changelog.
// They end in a hash of the stream and the durable: joined by "_" alone,
// stream ORDERS_EU with durable worker and ORDERS with EU_worker named
// one log, and each partition applied the other's entries.
func Names(stream, durable string) (name, subject string) {
	sum := sha256.Sum256([]byte(stream + "\x00" + durable))
	token := nameSafe.Replace(stream+"_"+durable) + "_" + hex.EncodeToString(sum[:5])
	return "JETLEDGER_CL_" + token, "_JETLEDGER.changelog." + token
}

// Metadata keys of a changelog stream and a snapshot: the partition they
// belong to, checked by Ensure and Restore.
const (
	MetaStream  = "jetledger-stream"
	MetaDurable = "jetledger-durable"
)

// belongs says whether meta names the partition stream/durable.
func belongs(meta map[string]string, stream, durable string) bool {
	return meta[MetaStream] == stream && meta[MetaDurable] == durable
}

// Ensure creates the partition's changelog stream if it is missing and
// returns it. The stream keeps every entry (no limits): a snapshot's
// position is what lets entries go.
func Ensure(ctx context.Context, js jetstream.JetStream, cfg Config) (*Log, error) {
	if cfg.Stream == "" || cfg.Durable == "" {
		return nil, fmt.Errorf("%w: a changelog needs the stream and the durable", ErrInvalidConfig)
	}
	cfg.Replicas = cmp.Or(cfg.Replicas, 1)
	cfg.MaxEntry = cmp.Or(cfg.MaxEntry, MaxEntryDefault)
	cfg.Timeout = cmp.Or(cfg.Timeout, 5*time.Second)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	name, subject := Names(cfg.Stream, cfg.Durable)
	s, err := js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		s, err = jsretry.CreateStream(ctx, js, jetstream.StreamConfig{Name: name, Subjects: []string{subject}, Replicas: cfg.Replicas,
			Storage: jetstream.FileStorage, Discard: jetstream.DiscardOld, Duplicates: 2 * time.Minute,
			Description: "jetledger: the changelog of " + cfg.Stream + "/" + cfg.Durable + "'s ledger",
			Metadata:    map[string]string{MetaStream: cfg.Stream, MetaDurable: cfg.Durable}})
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			s, err = js.Stream(ctx, name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("changelog: stream %s: %w", name, err)
	}
	info := s.CachedInfo()
	if !belongs(info.Config.Metadata, cfg.Stream, cfg.Durable) {
		return nil, fmt.Errorf("%w: stream %s is not the changelog of %s/%s (its metadata names %q/%q): delete or rename that stream, which jetledger did not make",
			ErrInvalidConfig, name, cfg.Stream, cfg.Durable, info.Config.Metadata[MetaStream], info.Config.Metadata[MetaDurable])
	}
	return &Log{js: js, cfg: cfg, name: name, subject: subject, log: cfg.Logger, instance: instanceOf(name, info)}, nil
}

func instanceOf(name string, info *jetstream.StreamInfo) string {
	return name + "@" + info.Created.UTC().Format(time.RFC3339Nano)
}

// Instance names this instance of the log: its stream's name and
// creation time. A ledger's position counts in one instance.
func (l *Log) Instance() string { return l.instance }

// MaxEntry implements ledger.Changelog.
func (l *Log) MaxEntry() int { return l.cfg.MaxEntry }

// Last returns the log's last entry's sequence (0: none yet).
func (l *Log) Last(ctx context.Context) (uint64, error) {
	info, err := l.info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.LastSeq, nil
}

// firstHeld is a log's first entry still held (0: none, all trimmed).
func firstHeld(st jetstream.StreamState) uint64 {
	if st.Msgs > 0 {
		return st.FirstSeq
	}
	return 0
}

// info reads the log's stream; one deleted, or another of its name made
// since (another instance), is ErrLogGone.
func (l *Log) info(ctx context.Context) (*jetstream.StreamInfo, error) {
	s, err := l.stream(ctx)
	if err != nil {
		return nil, err
	}
	return s.CachedInfo(), nil
}

// Check says whether the log is still there: ErrLogGone once its stream
// was deleted, or another of its name made since.
func (l *Log) Check(ctx context.Context) error {
	_, err := l.stream(ctx)
	return err
}

// stream is the log's stream, read now; one deleted, or another of its
// name made since (another instance), is ErrLogGone.
func (l *Log) stream(ctx context.Context) (jetstream.Stream, error) {
	s, err := l.js.Stream(ctx, l.name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("%w: %s: %w", ErrLogGone, l.name, err)
	}
	if err != nil {
		return nil, fmt.Errorf("changelog: %s: %w", l.name, err)
	}
	if instanceOf(l.name, s.CachedInfo()) != l.instance {
		return nil, fmt.Errorf("%w: %s was deleted and made again since this run opened it", ErrLogGone, l.name)
	}
	return s, nil
}

// Append implements ledger.Changelog: each part lands only right after
// the one before it (the first: after), so a writer that missed an entry
// is refused with ErrFenced. Each part is sent s2-compressed when that is
// smaller: a changeset's ids, subjects and column layout repeat, and an
// R3 publish, which the commit waits for, costs by the byte.
func (l *Log) Append(ctx context.Context, after uint64, parts [][]byte) error {
	return l.AppendAs(ctx, after, ulid.Make().String(), parts)
}

// AppendAs is Append with the entry's id chosen by the caller: part i has
// message id id.i (ledger.EntryAppender), by which a ledger that committed
// the entry before it landed asks later whether it did (CatchUp).
func (l *Log) AppendAs(ctx context.Context, after uint64, id string, parts [][]byte) error {
	l.lastMu.Lock()
	defer l.lastMu.Unlock()
	last, err := l.lastIDAt(ctx, after)
	if err != nil {
		return err
	}
	for i, p := range parts {
		m := nats.NewMsg(l.subject)
		m.Data = p
		if z := s2.Encode(nil, p); len(z) < len(p) {
			m.Data = z
			m.Header.Set(HeaderEncoding, EncodingS2)
		}
		msgID := id + "." + strconv.Itoa(i)
		m.Header.Set(jetstream.MsgIDHeader, msgID)
		m.Header.Set(HeaderFirst, strconv.FormatUint(after+1, 10))
		m.Header.Set(HeaderParts, strconv.Itoa(len(parts)))
		if after+uint64(i) == 0 && l.beginEmpty {
			m.Header.Set(HeaderBegun, BegunEmpty)
		}
		ack, err := l.publish(ctx, m, after+uint64(i), last)
		l.lastID = "" // unknown until this part is known to have landed
		if refused(err) {
			return fmt.Errorf("%w: %s refused entry %d: %v", ErrFenced, l.name, after+uint64(i)+1, err)
		}
		if err != nil {
			return fmt.Errorf("changelog: publish entry %d to %s: %w", after+uint64(i)+1, l.name, err)
		}
		if ack.Sequence != after+uint64(i)+1 {
			return fmt.Errorf("%w: entry %d of %s landed at %d", ErrFenced, after+uint64(i)+1, l.name, ack.Sequence)
		}
		l.lastSeq, l.lastID, last = ack.Sequence, msgID, msgID
	}
	return nil
}

// publish publishes m to follow entry after, whose message id is last
// ("" unknown). A refusal for the id where this instance of the log holds
// entry after with that id, or no longer holds it (an operator purged it,
// and the server forgot its last id), is published again with the
// sequence the only check; from a stream made again under the name, it
// is ErrLogGone.
func (l *Log) publish(ctx context.Context, m *nats.Msg, after uint64, last string) (*jetstream.PubAck, error) {
	for {
		m.Header.Del(jetstream.ExpectedLastMsgIDHeader) // the options set headers on m: a try again sets its own
		opts := []jetstream.PublishOpt{jetstream.WithExpectStream(l.name), jetstream.WithExpectLastSequence(after)}
		if last != "" {
			opts = append(opts, jetstream.WithExpectLastMsgID(last))
		}
		pctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
		ack, err := l.js.PublishMsg(pctx, m, opts...)
		cancel()
		if last == "" || !wrongLastID(err) {
			return ack, err
		}
		held, ierr := l.idOf(ctx, after)
		switch {
		case ierr != nil:
			return nil, ierr
		case held != "" && held != last:
			return ack, err // another writer's entry is last: fenced
		}
		last = ""
	}
}

// refused says whether a publish was refused for its expectations: the
// stream's last message is not the one the writer expected.
func refused(err error) bool {
	return wrongRevision(err) || wrongLastID(err)
}

// wrongLastID says whether a publish was refused for its expected last
// message id.
func wrongLastID(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeWrongLastMsgID
}

// errCodeWrongLastMsgID is the server's refusal of a publish whose
// expected last message id is not the stream's (JSStreamWrongLastMsgIDErrF).
const errCodeWrongLastMsgID jetstream.ErrorCode = 10070

// lastIDAt is the id of this instance's message after ("" for none: the
// log empty, or purged), which the next part must follow: the one this Log
// wrote or read last, or read now (idOf).
func (l *Log) lastIDAt(ctx context.Context, after uint64) (string, error) {
	if after == 0 {
		// An empty log: the expected sequence 0 is the check, which a log
		// deleted and made again (empty) passes as well. Its owner would
		// write on into it as the log it began, which names another
		// instance (its snapshot and its file's copy): both hosts then
		// waited for good (TestAttack5LogDeletedTwiceQuickly under load).
		return "", retried(ctx, func() error { _, err := l.stream(ctx); return err })
	}
	if l.lastID != "" && l.lastSeq == after {
		return l.lastID, nil
	}
	// Read on the first entry after a start or a take-over: a server's
	// passing trouble must not fence the owner before it writes at all.
	var id string
	err := retried(ctx, func() (err error) { id, err = l.idOf(ctx, after); return err })
	if err != nil {
		return "", err
	}
	l.lastSeq, l.lastID = after, id
	return id, nil
}

// retried runs read up to three times while it fails for a server's
// passing trouble.
func retried(ctx context.Context, read func() error) error {
	err := read()
	for try := 1; try < 3 && jsretry.Transient(err) && ctx.Err() == nil; try++ {
		err = read()
	}
	return err
}

// idOf reads the message id of entry seq of this instance ("" when it is
// no longer held: purged), between two checks that the stream is still
// this instance: a stream made again under the name is ErrLogGone.
func (l *Log) idOf(ctx context.Context, seq uint64) (string, error) {
	s, err := l.stream(ctx)
	if err != nil {
		return "", err
	}
	msg, err := s.GetMsg(ctx, seq)
	if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return "", fmt.Errorf("changelog: %s: entry %d, which the next must follow: %w", l.name, seq, err)
	}
	if _, err := l.info(ctx); err != nil {
		return "", err
	}
	if msg == nil {
		return "", nil
	}
	return msg.Header.Get(jetstream.MsgIDHeader), nil
}

// begunEmpty says whether the log's first entry says it began from a
// ledger with nothing in it (HeaderBegun); false when it is not held.
func (l *Log) begunEmpty(ctx context.Context) (bool, error) {
	s, err := l.stream(ctx)
	if err != nil {
		return false, err
	}
	msg, err := s.GetMsg(ctx, 1)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("changelog: %s: its first entry: %w", l.name, err)
	}
	return msg.Header.Get(HeaderBegun) == BegunEmpty, nil
}

// CatchUp applies to st every whole entry of the log after st's position
// up to the log's last when called. It returns the entry applied last and
// the log's last then: between them there are only parts of an entry its
// writer never finished (never committed), as TakeOver expects. A ledger of
// another instance, or whose next entry the log no longer holds (trimmed
// behind a snapshot), is refused with ErrNeedSnapshot.
func (l *Log) CatchUp(ctx context.Context, st *ledger.Store) (applied, last uint64, err error) {
	if err := l.settle(ctx, st); err != nil {
		return 0, 0, err
	}
	p, err := st.ChangelogPosition(ctx)
	if err != nil {
		return 0, 0, err
	}
	info, err := l.info(ctx)
	if err != nil {
		return 0, 0, err
	}
	applied, last = p.Seq, info.State.LastSeq
	if p.Log != l.instance && last == 0 {
		return 0, 0, nil // nothing to apply: the ledger may begin this log (TakeOver)
	}
	if p.Log != l.instance && (p.Log != "" || p.Seq != 0) {
		return applied, last, fmt.Errorf("%w: the ledger is a copy of %q, not of %s", ErrNeedSnapshot, p.Log, l.instance)
	}
	if applied >= last {
		return applied, last, nil
	}
	if first := firstHeld(info.State); first == 0 || first > applied+1 {
		return applied, last, fmt.Errorf("%w: %s holds entries from %d, the ledger needs %d", ErrNeedSnapshot, l.name, first, applied+1)
	}
	l.readMu.Lock()
	defer l.readMu.Unlock()
	applied, err = l.apply(ctx, st, applied, last)
	if err != nil {
		l.rd = nil // read again from the ledger's position next time
	}
	return applied, last, err
}

// apply reads the log from applied+1 through last and applies its whole
// entries to st, returning the entry applied last.
func (l *Log) apply(ctx context.Context, st *ledger.Store, applied, last uint64) (done uint64, err error) {
	rd, err := l.readerAt(ctx, applied+1)
	if err != nil {
		return applied, err
	}
	var pending []byte
	var first, parts uint64
	whole := entries{st: st, log: l.instance}
	// Whatever ends the read, the whole entries gathered are applied.
	defer func() { done = cmp.Or(whole.flushed(ctx), applied) }()
	for read := applied; read < last; {
		m, err := rd.next(ctx, last-read)
		if err != nil {
			return applied, fmt.Errorf("changelog: read %s after %d: %w", l.name, read, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return applied, err
		}
		seq := md.Sequence.Stream
		if read == applied && seq != applied+1 && pending == nil {
			return applied, fmt.Errorf("%w: %s starts at %d, the ledger needs %d", ErrNeedSnapshot, l.name, seq, applied+1)
		}
		read = seq
		f, _ := strconv.ParseUint(m.Headers().Get(HeaderFirst), 10, 64)
		n, _ := strconv.ParseUint(m.Headers().Get(HeaderParts), 10, 64)
		if f != first {
			pending, first, parts = nil, f, n // a new entry: one unfinished before it is dropped
		}
		if f > seq || f+n <= seq || f <= applied {
			continue // the rest of an entry begun before this ledger's position, or not an entry
		}
		data, err := decode(m)
		if err != nil {
			return applied, fmt.Errorf("changelog: entry %d of %s: %w", seq, l.name, err)
		}
		pending = append(pending, data...)
		if seq != first+parts-1 {
			continue
		}
		if err := whole.add(ctx, seq, pending); err != nil {
			return applied, err
		}
		pending = nil
	}
	return applied, whole.flush(ctx) // done: set by the deferred flush
}

// entries gathers whole entries to apply in one transaction, up to
// applyBatch of them or applyBytes of changes; what was applied last
// comes back from flushed.
type entries struct {
	st      *ledger.Store
	log     string
	batch   []ledger.ChangelogEntry
	bytes   int
	applied uint64
	err     error
}

const (
	applyBatch = 256
	applyBytes = 8 << 20
)

func (e *entries) add(ctx context.Context, last uint64, changes []byte) error {
	e.batch = append(e.batch, ledger.ChangelogEntry{Last: last, Changes: changes})
	if e.bytes += len(changes); len(e.batch) >= applyBatch || e.bytes >= applyBytes {
		return e.flush(ctx)
	}
	return nil
}

// flush applies the entries gathered; on failure none of them is.
func (e *entries) flush(ctx context.Context) error {
	if len(e.batch) == 0 || e.err != nil {
		return e.err
	}
	if e.err = e.st.ApplyEntries(ctx, e.log, e.batch); e.err == nil {
		e.applied = e.batch[len(e.batch)-1].Last
	}
	e.batch, e.bytes = e.batch[:0], 0
	return e.err
}

// flushed applies what is gathered, if it can, and says the entry applied
// last (0: none).
func (e *entries) flushed(ctx context.Context) uint64 {
	e.flush(ctx) //nolint:errcheck // the caller has its own error, or had this one from flush
	return e.applied
}

// reader is a follower's ordered consumer of the log, kept from one look
// to the next and read in batches: a consumer made at each look and a
// request per entry read a busy log at tens of entries a second on a
// cluster, and the consumers' churn answered "no responders".
type reader struct {
	cons jetstream.Consumer
	at   uint64 // the stream sequence it delivers next
	buf  []jetstream.Msg
}

// readBatch is the most entries one fetch asks for.
const readBatch = 256

// readerAt is the log's reader, made anew unless it is at seq.
func (l *Log) readerAt(ctx context.Context, seq uint64) (*reader, error) {
	if l.rd != nil && l.rd.at == seq {
		return l.rd, nil
	}
	cons, err := l.js.OrderedConsumer(ctx, l.name, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: seq})
	if err != nil {
		return nil, fmt.Errorf("changelog: read %s: %w", l.name, err)
	}
	l.rd = &reader{cons: cons, at: seq}
	return l.rd, nil
}

// next returns the next message, fetching up to want of them at a time.
func (r *reader) next(ctx context.Context, want uint64) (jetstream.Msg, error) {
	if len(r.buf) == 0 {
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		batch, err := r.cons.Fetch(int(min(want, readBatch)), jetstream.FetchContext(fctx))
		if err != nil {
			return nil, err
		}
		for m := range batch.Messages() {
			r.buf = append(r.buf, m)
		}
		if len(r.buf) == 0 {
			return nil, cmp.Or(batch.Error(), error(nats.ErrTimeout))
		}
	}
	m := r.buf[0]
	r.buf = r.buf[1:]
	if md, err := m.Metadata(); err == nil {
		r.at = md.Sequence.Stream + 1
	}
	return m, nil
}

// decode returns the changes a message of the log holds.
func decode(m jetstream.Msg) ([]byte, error) {
	switch enc := m.Headers().Get(HeaderEncoding); enc {
	case "":
		return m.Data(), nil
	case EncodingS2:
		return s2.Decode(nil, m.Data())
	default:
		return nil, fmt.Errorf("encoded as %q, which this version does not read", enc)
	}
}

// Lag is how many of the log's entries st has not applied.
func (l *Log) Lag(ctx context.Context, st *ledger.Store) (uint64, error) {
	p, err := st.ChangelogPosition(ctx)
	if err != nil {
		return 0, err
	}
	last, err := l.Last(ctx)
	if err != nil {
		return 0, err
	}
	return last - min(last, p.Seq), nil
}
