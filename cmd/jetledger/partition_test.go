package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/jetledger/jetledger/consumer/partition"
	"github.com/nats-io/nats.go/jetstream"
)

func TestPartitionFlagsUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "l.db")
	run := []string{"run", "--db", db}
	tests := []struct {
		args []string
		want string
	}{
		{append(run, "--subjects", "pay.*", "--partitions", "1"), "--partitions 1 is no partitioning"},
		{append(run, "--partitions", "4"), "--partitions needs --subjects with exactly one subject"},
		{append(run, "--subjects", "a.*,b.*", "--partitions", "4"), "--partitions needs --subjects with exactly one subject"},
		{append(run, "--subjects", "pay.>", "--partitions", "4"), `--partition-key 1: --subjects "pay.>" has 0 '*' tokens`},
		{append(run, "--subjects", "pay.*", "--partitions", "4", "--partition-key", "2"), `--partition-key 2: --subjects "pay.*" has 1 '*' tokens`},
		{append(run, "--subjects", "pay.*", "--partitions", "4", "--partition", "4"), "--partition 4: the stream has --partitions 4, numbered 0 to 3"},
		{append(run, "--partition=-1"), "--partition -1: partitions count from 0"},
		{append(run, "--partition", "1,1"), "--partition 1 is given twice"},
		{append(run, "--partition", "0,1", "--metrics", "127.0.0.1:0"), "--metrics serves one consumer"},
		{append(run, "--partition", "0", "--hub-url", "nats-leaf://127.0.0.1:7422", "--hub-stream", "H", "--edge-domain", "e"), "--partitions/--partition and --hub-url do not go together"},
		{append(run, "--stream", "S", "--standbys", "1"), "--standbys 1 needs --group"},
		{append(run, "--stream", "S", "--group", "g"), "--group needs a server to connect to"},
		{append(run, "--stream", "S", "--group", "g", "--nats", "nats://127.0.0.1:1", "--partition", "0"), "--group and --partition do not go together"},
		{append(run, "--stream", "S", "--group", "g.h", "--nats", "nats://127.0.0.1:1"), `--group: group: invalid config: group name "g.h"`},
		{append(run, "--stream", "S", "--group", "g", "--nats", "nats://127.0.0.1:1", "--standbys=-1"), "--group: group: invalid config: group g: 1 partitions and -1 standbys"},
		{append(run, "--stream", "S", "--group", "g", "--nats", "nats://127.0.0.1:1", "--group-stable-after", "1s"), "--group: group: invalid config: group g: stable after 1s"},
	}
	for _, tc := range tests {
		if msg := usageMessage(t, tc.args...); !strings.HasPrefix(msg, tc.want) {
			t.Errorf("%q: %q, want it to start with %q", tc.args, msg, tc.want)
		}
	}
	assertEmpty(t, dir, nil)
}

func TestPartitionMapping(t *testing.T) {
	t.Parallel()
	tr, err := partition.Transform("orders.*.*.>", 8, 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := "{{partition(8,2)}}.orders.{{wildcard(1)}}.{{wildcard(2)}}.>"; tr.Destination != want || tr.Source != "orders.*.*.>" {
		t.Fatalf("mapping %+v, want destination %s", tr, want)
	}
	if n := partition.Count(jetstream.StreamConfig{SubjectTransform: tr}); n != 8 {
		t.Fatalf("partition.Count = %d, want 8", n)
	}
	if n := partition.Count(jetstream.StreamConfig{}); n != 0 {
		t.Fatalf("an unpartitioned stream has %d partitions", n)
	}
	for db, want := range map[string]string{"ledger.db": "ledger-p3.db", "/var/lib/j/pay.sqlite": "/var/lib/j/pay-p3.sqlite", "ledger": "ledger-p3"} {
		if got := partition.Ledger(db, 3); got != want {
			t.Errorf("partition.Ledger(%s) = %s, want %s", db, got, want)
		}
	}
}
