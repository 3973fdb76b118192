package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// A host where the operator once ran 'nats context select prod': the ledger
// is this site's (its run used the embedded server). 'ledger prune' without
// --nats must not read prod's stream of the same name, whose first sequence
// is far ahead, and prune this ledger's rows by it.
func TestSelectedContextDoesNotPruneByAnotherServersStream(t *testing.T) {
	home := contextHome(t)
	prod := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, prod)
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "PAY", Subjects: []string{"pay.>"}})
	for i := range 50 {
		js.Publish(t.Context(), "pay.x", []byte(fmt.Sprint(i)))
	}
	s, _ := js.Stream(t.Context(), "PAY")
	if err := s.Purge(t.Context()); err != nil { // prod's PAY now starts at 51
		t.Fatal(err)
	}
	writeContext(t, home, "prod", map[string]any{"url": prod.ClientURL()})
	if err := os.WriteFile(filepath.Join(home, "nats", "context.txt"), []byte("prod"), 0o600); err != nil {
		t.Fatal(err)
	}
	// This site's ledger: messages 1..3 of its own PAY, 8 days old.
	db := filepath.Join(t.TempDir(), "l.db")
	old := time.Now().Add(-8 * 24 * time.Hour)
	st, err := ledger.Open(db, ledger.Config{Now: func() time.Time { return old }})
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 3; seq++ {
		if _, err := st.ApplyBatch(context.Background(), []ledger.Delivery{{MessageID: fmt.Sprint("id", seq), Stream: "PAY", Sequence: seq, Subject: "pay.x", Data: []byte("{}")}},
			func(context.Context, *ledger.Tx, ledger.Delivery) error { return nil }, ledger.Budget{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.RememberConsumer(context.Background(), "PAY", "jetledger", ""); err != nil {
		t.Fatal(err)
	}
	st.Close()
	code, out, errOut := runMain("ledger", "prune", "--db", db)
	t.Logf("exit %d: %s%s", code, out, errOut)
	if code == exitOK && strings.Contains(out, "pruned 3 processed_messages") {
		t.Fatalf("prune without --nats read the selected context's server (%s), not this site's, and pruned by its stream: %s", prod.ClientURL(), out)
	}
}
