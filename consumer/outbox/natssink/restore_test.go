package natssink_test

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/natssink"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// EFF is restored from a copy of its store taken before a row's send
// landed, and new messages are published since, past the row's recorded
// position (issue 19, points 1-2 meet a restored stream). The restored
// stream has the same name and creation time (the store keeps it), so it
// passes for the instance the row was sent to; but it lost the item, and
// downstream may have read it already. "Never seen" must not be said: the
// lookup's own rollback check (last < position) is outrun. Whether or not
// a row sent later, which the restore lost too, is there to give it away.
func TestLookupOnARestoredStreamCannotSayNever(t *testing.T) {
	t.Parallel()
	for _, later := range []bool{false, true} {
		t.Run(map[bool]string{false: "nothing sent since", true: "a later send lost too"}[later], func(t *testing.T) {
			t.Parallel()
			lookupOnARestoredStream(t, later)
		})
	}
}

func lookupOnARestoredStream(t *testing.T, later bool) {
	store, backup := t.TempDir(), t.TempDir()
	opts := &server.Options{StoreDir: store}
	e := newEnv(t, opts, time.Minute, jetstream.StreamConfig{})
	publish := func(js jetstream.JetStream, n int) {
		for range n {
			if _, err := js.Publish(t.Context(), "effects.other", []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish(e.js, 3)
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
	if err := os.CopyFS(backup, os.DirFS(store)); err != nil { // the operator's backup
		t.Fatal(err)
	}
	srv := consumertest.RunServerWithOptions(t, &server.Options{StoreDir: store})
	nc, js := consumertest.Connect(t, srv, nats.MaxReconnects(-1))
	e.nc, e.js = nc, js
	sink := e.sink(t)
	id := e.enqueue(t, "m1")[0]
	to, err := sink.Position(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Transition(t.Context(), id, ledger.Claim, ledger.Params{Worker: "w", Lease: time.Minute, SentTo: to}); err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Send(t.Context(), e.status(t, id)); err != nil { // it landed; the answer was lost
		t.Fatal(err)
	}
	if _, err := e.st.Transition(t.Context(), id, ledger.Review, ledger.Params{Worker: "w", Reason: "ack lost"}); err != nil {
		t.Fatal(err)
	}
	if later { // sent after the row's lease ended: it vouches for what the stream held then
		e.clk.add(2 * time.Minute)
		e.sendByHand(t, sink, e.enqueue(t, "m2")[0])
	}
	srv.Shutdown()
	srv.WaitForShutdown()
	if err := os.RemoveAll(store); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(store, os.DirFS(backup)); err != nil { // restored from the backup
		t.Fatal(err)
	}
	srv = consumertest.RunServerWithOptions(t, &server.Options{StoreDir: store})
	nc, js = consumertest.Connect(t, srv, nats.MaxReconnects(-1))
	e.nc, e.js = nc, js
	publish(js, 3) // life goes on past the row's position
	sink = e.sink(t)
	ext, found, err := sink.Lookup(t.Context(), e.status(t, id))
	if !found && !errors.Is(err, natssink.ErrCannotProve) {
		t.Fatalf("lookup on a stream restored from before the send = %q, found %v, %v; want ErrCannotProve (the restored copy lost the item)", ext, found, err)
	}
}
