package changelog_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
)

// What an owner records is read back; none is zero; a value that is no
// owner's position is a wait that names the key, not a server's error.
func TestWhatAnOwnerSaidIsReadBack(t *testing.T) {
	t.Parallel()
	s := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, s)
	ctx := t.Context()
	if p, err := changelog.ReadOwner(ctx, js, "PAY", "pay-p0"); err != nil || p != (changelog.OwnerPosition{}) {
		t.Fatalf("no bucket: %+v, %v; want zero", p, err)
	}
	log := ensure(t, js, changelog.Config{Stream: "PAY", Durable: "pay-p0"})
	if err := log.RecordOwner(ctx, "host-a", ledger.ChangelogPosition{Log: log.Instance(), Seq: 7}); err != nil {
		t.Fatal(err)
	}
	p, err := changelog.ReadOwner(ctx, js, "PAY", "pay-p0")
	if err != nil || p.Log != log.Instance() || p.Seq != 7 || p.Owner != "host-a" || p.At.IsZero() {
		t.Fatalf("read back %+v, %v", p, err)
	}
	kv, err := js.KeyValue(ctx, changelog.OwnersBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, log.OwnerKey(), []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	_, err = changelog.ReadOwner(ctx, js, "PAY", "pay-p0")
	if !errors.Is(err, changelog.ErrWaiting) || !strings.Contains(err.Error(), log.OwnerKey()) {
		t.Fatalf("a bad value: %v; want a wait naming key %s", err, log.OwnerKey())
	}
}
