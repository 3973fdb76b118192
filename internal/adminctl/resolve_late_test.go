package adminctl_test

import (
	"path/filepath"
	"testing"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/internal/adminctl"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
)

// Another partition's run answers at once, and the run asked for is served
// only after discovery's first request went by (its subscription late
// across the cluster's routes): Resolve asks again and finds it, where
// taking the first round's answers finds none that matches.
func TestResolveFindsARunThatAnswersLate(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	nc, _ := consumertest.Connect(t, srv)
	runNC, _ := consumertest.Connect(t, srv)
	serve := func(durable string) {
		st, err := ledger.Open(filepath.Join(t.TempDir(), durable+".db"), ledger.Config{})
		if err != nil {
			t.Error(err)
			return
		}
		t.Cleanup(func() { st.Close() })
		s, err := admin.Serve(admin.Config{Conn: runNC, Store: st, Address: admin.Address{Stream: "PAY", Durable: durable}})
		if err != nil {
			t.Error(err)
			return
		}
		t.Cleanup(func() { s.Stop() })
	}
	serve("pay-p1")
	late := false
	spy, err := runNC.Subscribe("$SRV.INFO."+admin.ServiceName, func(*nats.Msg) {
		if !late {
			late = true
			serve("pay-p0")
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { spy.Unsubscribe() }) //nolint:errcheck // done
	if err := runNC.Flush(); err != nil {
		t.Fatal(err)
	}
	a, err := adminctl.Resolve(t.Context(), nc, srv.ClientURL(), adminctl.Target{Partition: 0})
	if err != nil || a.Durable != "pay-p0" {
		t.Fatalf("Resolve --partition 0 = %+v, %v; want pay-p0, served after the first request", a, err)
	}
}
