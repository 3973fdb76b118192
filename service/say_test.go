package service

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/node"
)

// partitionNames are a command line's names for the partitions' settings.
var partitionNames = Names{Program: "run", Settings: map[string]string{"Partitions.Named": "--partition", "Partitions.Count": "--partitions",
	"Consumer.Durable": "--durable", "Stream.Subjects": "--subjects"}}

// Say words a stream partitioned otherwise than the run as Names says; a
// partition named past the count is a refused config.
func TestSaySaysThePartitionRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		names   Names
		err     error
		wantErr error
		want    string
	}{
		{"partitioned", partitionNames, &PartitionedError{Stream: "EV", Partitions: 4, Durable: "d"}, ErrPartitioned,
			"stream EV is partitioned into 4: consume it with run --partition I (each partition into its own ledger), or name a partition's durable (--durable d-p0); one consumer over every partition would apply them all into one ledger, beside the partitions' own"},
		{"not partitioned", partitionNames, &PartitionCountError{Stream: "EV"}, ErrNotPartitioned,
			"stream EV is not partitioned (no {{partition(N,…)}} subject mapping): create it with run --subjects … --partitions N, or leave out --partition"},
		{"named past the count", partitionNames, &PartitionCountError{Stream: "EV", Have: 2, Want: 3, Named: true}, ErrInvalidConfig,
			"service: invalid config: --partition 3: stream EV has 2 partitions, numbered 0 to 1"},
		{"another count", partitionNames, &PartitionCountError{Stream: "EV", Have: 2, Want: 4}, ErrPartitionCount,
			"stream EV has 2 partitions, not --partitions 4; a partitioned stream keeps its count (leave out --partitions)"},
		{"a Go program's", Names{}, &PartitionCountError{Stream: "EV", Have: 2, Want: 4}, ErrPartitionCount,
			"stream EV has 2 partitions, not Partitions.Count 4; a partitioned stream keeps its count (leave out Partitions.Count)"},
	}
	for _, tt := range tests {
		err := Config{Names: tt.names}.Say(&StepError{Step: StepStream, Err: tt.err})
		if err.Error() != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, err, tt.want)
		}
		var st *StepError
		if !errors.Is(err, tt.wantErr) || !errors.Is(err, tt.err) || !errors.As(err, &st) || st.Step != StepStream {
			t.Errorf("%s: %v, want %v and %v in a *StepError of %s", tt.name, err, tt.wantErr, tt.err, StepStream)
		}
	}
}

// A ledger at its size cap is said with the setting that raises it and
// what prunes it, and stays ledger.ErrAtMaxSize; without a cap set, it is
// not this service's to say.
func TestSaySaysTheLedgerAtItsCap(t *testing.T) {
	t.Parallel()
	full := &StepError{Step: StepRun, Err: fmt.Errorf("commit: %w", &ledger.MaxSizeError{MaxSizeBytes: 1 << 20})}
	names := Names{Settings: map[string]string{"Ledger.MaxSizeBytes": "--db-max-size", "Prune": "jetledger ledger prune"}}
	err := Config{Names: names, Ledger: ledger.Config{MaxSizeBytes: 1 << 20}}.Say(full)
	var st *StepError
	if !errors.Is(err, ledger.ErrAtMaxSize) || !errors.As(err, &st) || st.Step != StepRun ||
		!strings.HasPrefix(err.Error(), "the database reached --db-max-size 1MiB while its disk has room: raise --db-max-size, or prune it (jetledger ledger prune); nothing of the failed batch was acked") {
		t.Fatalf("Say = %v, want the cap's advice in a *StepError of %s, wrapping ledger.ErrAtMaxSize", err, StepRun)
	}
	if err := (Config{Names: names}).Say(full); err != full { //nolint:errorlint // the same error, unsaid
		t.Fatalf("Say without a cap = %v, want the error as it was", err)
	}
}

// Start says its errors as Names says: node.Start's refusal of an address
// in use names the settings that fix it.
func TestStartSaysItsErrors(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dir := t.TempDir()
	cfg := Config{DB: filepath.Join(dir, "l.db"), Node: node.Config{Listen: l.Addr().String()}, Names: flagNames}
	cfg.Stream.Name = "EV"
	_, err = Start(t.Context(), cfg)
	var st *StepError
	if !errors.As(err, &st) || st.Step != StepNode || !errors.Is(err, node.ErrListen) {
		t.Fatalf("Start: %v, want node.ErrListen in a *StepError of %s", err, StepNode)
	}
	want := "embedded server cannot listen on " + l.Addr().String()
	if got := err.Error(); len(got) < len(want) || got[:len(want)] != want {
		t.Errorf("Start: %q, want it said as %q…", got, want)
	}
}

// With Explicit, a zero Effects.Timeout was given, not left at its
// default, and is refused.
func TestExplicitEffectsTimeout(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name       string
		explicit   bool
		timeout    time.Duration
		wantReason string
	}{
		{"default", false, 0, ""},
		{"explicit zero", true, 0, "--effects-timeout 0s: must be positive"},
		{"explicit negative", true, -time.Second, "--effects-timeout -1s: must be positive"},
		{"negative", false, -time.Second, "--effects-timeout -1s: must not be negative"},
		{"explicit", true, time.Second, ""},
	} {
		err := Config{Names: flagNames, Explicit: tt.explicit, Effects: &Effects{Subject: "fx", Timeout: tt.timeout}}.CheckEdge()
		var ce *ConfigError
		switch {
		case tt.wantReason == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.wantReason != "" && (!errors.As(err, &ce) || ce.Reason != tt.wantReason):
			t.Errorf("%s: %v, want a *ConfigError said %q", tt.name, err, tt.wantReason)
		}
	}
}

// CheckPrune refuses a negative duration as Validate does.
func TestCheckPrune(t *testing.T) {
	t.Parallel()
	n := Names{Settings: map[string]string{"Prune.Retention": "--retention", "Prune.OutboxRetention": "--outbox-retention"}}
	for _, tt := range []struct {
		name       string
		p          Prune
		wantReason string
	}{
		{"zero", Prune{}, ""},
		{"retention", Prune{Retention: -time.Second}, "--retention -1s: must not be negative"},
		{"outbox retention", Prune{Retention: time.Hour, OutboxRetention: -time.Minute}, "--outbox-retention -1m0s: must not be negative"},
		{"interval, unnamed", Prune{Interval: -time.Second}, "Prune.Interval -1s: must not be negative"},
	} {
		err := CheckPrune(tt.p, n)
		var ce *ConfigError
		switch {
		case tt.wantReason == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.wantReason != "" && (!errors.Is(err, ErrInvalidConfig) || !errors.As(err, &ce) || ce.Reason != tt.wantReason):
			t.Errorf("%s: %v, want a *ConfigError said %q", tt.name, err, tt.wantReason)
		}
	}
}

// The node and its leaf get the caller's names for their settings, the
// caller's leaf untouched; the edge is checked before the consumer.
func TestNamesPassDownAndEdgeFirst(t *testing.T) {
	t.Parallel()
	leaf := &node.LeafConfig{URLs: []string{"nats-leaf://h:7422"}, Domain: "site1"}
	cfg := Config{DB: "l.db", Names: flagNames, Node: node.Config{Leaf: leaf}, Hub: &Hub{Stream: "H"}}
	cfg.Stream.Name = "EV"
	c, err := cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.Node.Names["Listen"] != "--listen" || c.Node.Leaf.Names["URLs"] != "--hub-url" || leaf.Names != nil {
		t.Errorf("node names %v, leaf names %v, the caller's leaf's %v", c.Node.Names, c.Node.Leaf.Names, leaf.Names)
	}
	cfg.DB, cfg.Hub = "", &Hub{}
	var ce *ConfigError
	if err := cfg.Validate(); !errors.As(err, &ce) || ce.Reason != "--hub-url needs --hub-stream, the hub's stream to source" {
		t.Errorf("Validate of a bad edge and a bad DB: %v, want the edge's refusal", err)
	}
}
