package changelog_test

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// remakeBeforePublish is the other host's look landing between the first
// entry's check (Log.lastIDAt: the stream still the instance opened) and
// its publish: right before the publish of an entry to subject leaves, the
// log is deleted and made again (empty), as reopenLog does on the other host.
type remakeBeforePublish struct {
	jetstream.JetStream
	raw     jetstream.JetStream
	cfg     changelog.Config
	subject string
	armed   atomic.Bool
	remade  atomic.Int32
}

func (r *remakeBeforePublish) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if m.Subject == r.subject && r.armed.CompareAndSwap(true, false) {
		name, _ := changelog.Names(r.cfg.Stream, r.cfg.Durable)
		if err := r.raw.DeleteStream(ctx, name); err == nil {
			if _, err := changelog.Ensure(ctx, r.raw, r.cfg); err == nil {
				r.remade.Add(1)
			}
		}
	}
	return r.JetStream.PublishMsg(ctx, m, opts...)
}

// Attack 6 on c6366ef. The check of the first entry is a read before the
// publish (check, then act): the log deleted and made again empty by the
// other host after that read and before the publish passes the expected
// sequence 0 as before the fix. The owner's take-over entry lands in the
// new log under the old instance's name, and every later entry follows it
// there (the next part expects the id this writer wrote last, which the
// new log now holds).
//
// Not closed yet: an instance check a publish itself makes (a first
// marker entry of each instance, whose id every later entry expects) is
// the fix. Until then this runs with JETLEDGER_KNOWN_GAPS=1.
func TestAttack6FirstEntryRacesTheLogMadeAgain(t *testing.T) {
	if os.Getenv("JETLEDGER_KNOWN_GAPS") == "" {
		t.Skip("a known gap (the log made again between the first entry's check and its publish); JETLEDGER_KNOWN_GAPS=1 runs it")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := consumertest.RunServer(t)
	_, raw := consumertest.Connect(t, s)
	cfg := changelog.Config{Stream: "PAY", Durable: "pay-p0"}
	_, subject := changelog.Names(cfg.Stream, cfg.Durable)
	js := &remakeBeforePublish{JetStream: raw, raw: raw, cfg: cfg, subject: subject}
	log, st := heldLogStore(ctx, t, js, raw, cfg)
	if last, err := log.Last(ctx); err != nil || last != 0 {
		t.Fatalf("the log begun: last %d (%v), want empty", last, err)
	}
	js.armed.Store(true)
	toErr := st.TakeOverAsSoleWriter(ctx, log.Instance(), "host-a", 0, 0)
	if js.remade.Load() != 1 {
		t.Fatalf("the log was not made again before the first entry's publish (take-over: %v)", toErr)
	}
	_, batchErr := st.ApplyBatch(ctx, batch(0, 5, 0), credit, ledger.Budget{Work: time.Minute})
	name, _ := changelog.Names(cfg.Stream, cfg.Durable)
	stream, err := raw.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx, jetstream.WithDeletedDetails(false))
	if err != nil {
		t.Fatal(err)
	}
	amt, n := balance(t, st)
	t.Logf("take-over: %v; batch after it: %v; the new log (%s) holds %d messages; the owner's Log still says %s; its file: balance %d over %d messages",
		toErr, batchErr, info.Created.UTC().Format(time.RFC3339Nano), info.State.Msgs, log.Instance(), amt, n)
	if !errors.Is(toErr, changelog.ErrLogGone) || info.State.Msgs != 0 {
		t.Errorf("the log deleted and made again (empty) between the first entry's check and its publish: the take-over says %v (want ErrLogGone) "+
			"and the new log holds %d messages (want 0); a batch after it: %v, the owner's file counts %d messages under instance %s, which no longer exists",
			toErr, info.State.Msgs, batchErr, n, log.Instance())
	}
}

// failStreamOnce answers the next look at stream name as a server that
// did not answer in time (a leader election).
type failStreamOnce struct {
	jetstream.JetStream
	name  string
	armed atomic.Bool
}

func (f *failStreamOnce) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	if name == f.name && f.armed.CompareAndSwap(true, false) {
		return nil, nats.ErrTimeout
	}
	return f.JetStream.Stream(ctx, name)
}

// The first entry's new read (c6366ef) is one more request that a
// server's passing trouble can fail; the read of a later entry's id is
// tried 3 times for that ("must not fence the owner before it writes at
// all"), this one not at all. Own returns a take-over's error that is not
// ErrFenced, and runOwned ends the run on an error that is not a loss.
func TestAttack6FirstEntryCheckSurvivesAPassingTrouble(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := consumertest.RunServer(t)
	_, raw := consumertest.Connect(t, s)
	cfg := changelog.Config{Stream: "PAY", Durable: "pay-p0"}
	name, _ := changelog.Names(cfg.Stream, cfg.Durable)
	js := &failStreamOnce{JetStream: raw, name: name}
	log, st := heldLogStore(ctx, t, js, raw, cfg)
	js.armed.Store(true)
	if err := st.TakeOverAsSoleWriter(ctx, log.Instance(), "host-a", 0, 0); err != nil {
		t.Errorf("the take-over's first entry after one look the server did not answer in time: %v (fenced %v, log gone %v)",
			err, errors.Is(err, changelog.ErrFenced), errors.Is(err, changelog.ErrLogGone))
	}
}
