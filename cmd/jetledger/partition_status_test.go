package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/partition"
	"github.com/jetledger/jetledger/health"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/publisher"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// partitionedLedgers makes the stream PAY partitioned into 2 and the
// ledgers of both partitions beside db, as run records them, with a dead
// letter in partition 1's: not the first, which status reads its names from.
func partitionedLedgers(t *testing.T, js jetstream.JetStream, db string) {
	t.Helper()
	tr, err := partition.Transform("pay.*", 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	consumertest.CreateStream(t, js, jetstream.StreamConfig{Name: "PAY", Subjects: []string{"pay.*"}, SubjectTransform: tr})
	for i := range 2 {
		st, err := ledger.Open(partition.Ledger(db, i), ledger.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.RememberConsumer(t.Context(), "PAY", partition.Durable("jetledger", i), ""); err != nil {
			t.Fatal(err)
		}
		st.Close()
	}
	mapping, err := server.NewSubjectTransform(tr.Source, tr.Destination)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		subject := fmt.Sprintf("pay.acct%d", i)
		to, err := mapping.Match(subject)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(to, "1.") {
			deadLettered(t, js, partition.Ledger(db, 1), "PAY", publisher.Message{Subject: subject, ID: "bad", Data: []byte(`{}`)})
			return
		}
	}
}

// status reads every partition's ledger on this host: a dead letter in any
// of them is counted, in the sum and in its partition, and names no ledger
// that is not there; it needs a person, in that partition's ledger (exit
// 3); a partition's ledger it cannot read is a problem (exit 1).
func TestStatusReadsEveryPartitionsLedger(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	dir := t.TempDir()
	db := filepath.Join(dir, "pay.db")
	partitionedLedgers(t, js, db)
	const home = 1

	code, out, errOut := runMain("status", "--nats", srv.ClientURL(), "--db", db, "--json")
	var rep struct {
		Serves struct {
			From string `json:"from"`
		} `json:"serves"`
		Ledger     *ledger.Stats `json:"ledger"`
		Partitions []struct {
			Partition   int    `json:"partition"`
			Ledger      string `json:"ledger"`
			DeadLetters int64  `json:"dead_letters"`
		} `json:"partitions"`
		Attention []health.Need `json:"attention"`
		Problems  []string      `json:"problems"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitAttention {
		t.Fatalf("status: exit %d, %v, want %d\n%s%s", code, err, exitAttention, out, errOut)
	}
	if len(rep.Attention) != 1 || rep.Attention[0].Kind != ledger.AttentionDeadLetter || rep.Attention[0].Where != partition.Ledger(db, home) {
		t.Errorf("status's attention %+v, want the dead letter in partition %d's ledger", rep.Attention, home)
	}
	if rep.Ledger == nil || rep.Ledger.DeadLetters != 1 {
		t.Errorf("status counts %+v dead letters over the partitions, want 1", rep.Ledger)
	}
	if rep.Ledger != nil && rep.Ledger.Path != "" {
		if _, err := os.Stat(rep.Ledger.Path); err != nil {
			t.Errorf("status names the ledger %s, which is not there", rep.Ledger.Path)
		}
	}
	if len(rep.Partitions) != 2 {
		t.Fatalf("status shows %d partitions, want 2: %s", len(rep.Partitions), out)
	}
	for i, p := range rep.Partitions {
		want := int64(0)
		if i == home {
			want = 1
		}
		if p.Partition != i || p.Ledger != partition.Ledger(db, i) || p.DeadLetters != want {
			t.Errorf("partition %d: %+v, want its ledger with %d dead letters", i, p, want)
		}
	}

	// Partition 1's ledger unreadable (not the first, which names are read
	// from): a problem, exit 1.
	if err := os.WriteFile(partition.Ledger(db, home), []byte("not a database, but long enough to be read as one's header......"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runMain("status", "--nats", srv.ClientURL(), "--db", db, "--json"); code != exitFailure {
		t.Errorf("status with partition %d's ledger unreadable: exit %d, want %d\n%s%s", home, code, exitFailure, out, errOut)
	}
}
