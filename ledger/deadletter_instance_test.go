package ledger_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/jetledger/jetledger/ledger"
)

// A stream deleted and made again counts from sequence 1 again: a dead
// letter of the new instance at a sequence an old instance's dead letter
// has is another message. Keyed by stream and sequence alone, it was merged
// into the old row (its id, subject and payload kept, the new payload
// lost, a requeue republishing the old one). Found by a review of the
// nemesis's stream re-create (issue 20).
func TestDeadLettersOfAnotherStreamInstanceAreKeptApart(t *testing.T) {
	t.Parallel()
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	old := ledger.DeadLetter{MessageID: "old-id", Stream: "EV", Instance: "EV@1", Sequence: 5, Subject: "ev.pay", Payload: []byte("old"), Reason: "bad", Deliveries: 1}
	nw := ledger.DeadLetter{Stream: "EV", Instance: "EV@2", Sequence: 5, Subject: "ev.other", Payload: []byte("new"), Reason: "no id", Deliveries: 1}
	again := old
	again.Reason, again.Deliveries = "bad again", 2
	for _, dl := range []ledger.DeadLetter{old, nw, again} {
		if err := st.RecordDeadLetters(ctx, []ledger.DeadLetter{dl}); err != nil {
			t.Fatal(err)
		}
	}
	dls, err := st.DeadLetters(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(dls) != 2 {
		t.Fatalf("%d dead letters, want 2: one per instance (the same message again updates its own row)", len(dls))
	}
	for _, d := range dls {
		switch d.Instance {
		case "EV@1":
			if string(d.Payload) != "old" || d.MessageID != "old-id" || d.Deliveries != 2 {
				t.Errorf("old instance's dead letter %+v: want its payload and id, updated to 2 deliveries", d)
			}
		case "EV@2":
			if string(d.Payload) != "new" || d.MessageID != "" || d.Subject != "ev.other" {
				t.Errorf("new instance's dead letter %+v: want its own payload and subject", d)
			}
		default:
			t.Errorf("dead letter of instance %q", d.Instance)
		}
	}
	for inst, want := range map[string]bool{"EV@1": true, "EV@2": true, "EV@3": false} {
		if has, err := st.HasDeadLetter(ctx, "EV", inst, 5); err != nil || has != want {
			t.Errorf("HasDeadLetter(EV, %s, 5) = %v, %v; want %v", inst, has, err, want)
		}
	}
}
