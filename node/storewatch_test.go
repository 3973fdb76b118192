package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats.go/jetstream"
)

// Found by review (issue 19, point 7): the watch took a failure of any
// stream the server's health check reports for a store that cannot write.
// A stream that did not recover at start (its meta file damaged: another
// stream than run's, on a disk with room) is a lasting one, so every start
// of run stopped two seconds later with advice to free space, and a
// supervisor restarted it for ever. Only the streams run depends on count.
func TestStoreWatchIgnoresAnotherStreamThatDidNotRecover(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "nats")
	start := func() *Node {
		e, err := Start(t.Context(), Config{Listen: "127.0.0.1:0", StoreDir: dir, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := start()
	js, err := e.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "EVENTS", Subjects: []string{"ev.>"}})
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"other.>"}})
	e.Close()
	metas, err := filepath.Glob(filepath.Join(dir, "jetstream", "*", "streams", "OTHER", "meta.inf"))
	if err != nil || len(metas) != 1 {
		t.Fatalf("OTHER's meta file: %v %v", metas, err)
	}
	if err := os.WriteFile(metas[0], []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	e = start()
	t.Cleanup(e.Close)
	e.DependOn("EVENTS") // as run does with its stream
	if js, err = e.JetStream(); err != nil {
		t.Fatal(err)
	}
	// run's stream takes writes: nothing is wrong with the store's disk.
	if _, err := js.Publish(t.Context(), "ev.x", []byte("x")); err != nil {
		t.Fatalf("publish to EVENTS: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if err := e.Watch(ctx, 50*time.Millisecond); errors.Is(err, ErrStoreFailed) {
		t.Fatalf("the watch stops run while its stream takes writes: %v", err)
	}
}
