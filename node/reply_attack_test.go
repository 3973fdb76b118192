package node

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A viewer may ask the admin API's reads, and names its reply subject: a
// reply of the run's own connection into the JetStream API would act
// with the run's rights. Asked with the reply $JS.API.STREAM.DELETE.EV,
// the API and micro's discovery must not delete the stream.
func TestAViewersReplySubjectCannotActAsTheRun(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	n, err := Start(ctx, Config{Listen: "127.0.0.1:0", StoreDir: filepath.Join(t.TempDir(), "nats"), Logger: quiet,
		Token: "admin-secret", Viewers: []string{"view"}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	own, err := n.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := own.CreateStream(ctx, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.>"}}); err != nil {
		t.Fatal(err)
	}
	cl, err := own.CreateStream(ctx, jetstream.StreamConfig{Name: "CL", Subjects: []string{"_JETLEDGER.changelog.x"}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runConn, err := n.AdminConn()
	if err != nil {
		t.Fatal(err)
	}
	defer runConn.Close()
	if err != nil {
		t.Fatal(err)
	}

	addr := admin.Address{Stream: "EV", Durable: "run"}
	srv, err := admin.Serve(admin.Config{Conn: runConn, Store: st, Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	viewer, err := dial(t, n, nats.Token("view"), nats.CustomInboxPrefix(ViewerInboxPrefix))
	if err != nil {
		t.Fatal(err)
	}
	for _, subject := range []string{addr.Subject("status"), "$SRV.INFO." + admin.ServiceName, "$SRV.PING"} {
		for _, reply := range []string{"$JS.API.STREAM.DELETE.EV", "_JETLEDGER.changelog.x", "ev.x"} {
			if err := viewer.PublishMsg(&nats.Msg{Subject: subject, Reply: reply}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The API answers a proper request after those: they were handled.
	var s admin.Status
	if err := admin.Call(ctx, viewer, addr, "status", nil, &s); err != nil {
		t.Fatal(err)
	}
	if err := viewer.Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // what the server may still do with a reply it took
	if _, err := own.Stream(ctx, "EV"); errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatal("a viewer's request with the reply $JS.API.STREAM.DELETE.EV deleted the stream")
	}
	for _, name := range []string{"EV", "CL"} {
		if s, err := own.Stream(ctx, name); err != nil || s.CachedInfo().State.Msgs != 0 {
			t.Errorf("stream %s holds %d messages after a viewer's requests with replies into it (%v), want 0", name, s.CachedInfo().State.Msgs, err)
		}
	}
	_ = cl
}
