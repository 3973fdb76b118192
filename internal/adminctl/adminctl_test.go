package adminctl_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/internal/adminctl"
	"github.com/jetledger/jetledger/ledger"
)

// Two partitions' APIs answer: no flag is refused listing both and the
// flags that tell them apart; --partition chooses one; a site that has
// none is refused naming what was asked and where.
func TestResolveChoosesOneRun(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	nc, _ := consumertest.Connect(t, srv)
	for _, d := range []string{"pay-p0", "pay-p1"} {
		st, err := ledger.Open(filepath.Join(t.TempDir(), d+".db"), ledger.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		s, err := admin.Serve(admin.Config{Conn: nc, Store: st, Address: admin.Address{Stream: "PAY", Durable: d}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Stop() })
	}
	url := srv.ClientURL()
	_, err := adminctl.Resolve(t.Context(), nc, url, adminctl.Target{Partition: -1})
	if !errors.Is(err, adminctl.ErrNotOne) || !strings.Contains(err.Error(), "pay-p0") || !strings.Contains(err.Error(), "pay-p1") || !strings.Contains(err.Error(), "--partition") {
		t.Fatalf("two runs, no flag: %v", err)
	}
	for _, target := range []adminctl.Target{{Durable: "pay", Partition: 1}, {Partition: 1}, {Durable: "pay-p1", Partition: -1}} {
		a, err := adminctl.Resolve(t.Context(), nc, url, target)
		if err != nil || a.Durable != "pay-p1" || a.Stream != "PAY" {
			t.Fatalf("%+v: %v %+v", target, err, a)
		}
	}
	_, err = adminctl.Resolve(t.Context(), nc, url, adminctl.Target{Site: "site9", Partition: -1})
	if !errors.Is(err, adminctl.ErrNotOne) || !strings.Contains(err.Error(), "site site9") || !strings.Contains(err.Error(), url) {
		t.Fatalf("a site with no run: %v", err)
	}
}
