package service

import (
	"context"
	"errors"
	"testing"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/natsconn"
	"github.com/jetledger/jetledger/node"
	"github.com/jetledger/jetledger/stream"
)

// A Config that cannot run is refused before any I/O, across fields too.
func TestConfigIsValidatedBeforeAnyIO(t *testing.T) {
	t.Parallel()
	base := Config{DB: "l.db", Stream: stream.Config{Name: "S"}}
	handler := func(context.Context, *ledger.Tx, ledger.Delivery) error { return nil }
	tests := []struct {
		name    string
		edit    func(*Config)
		wantErr error
	}{
		{"defaults", func(*Config) {}, nil},
		{"no db", func(c *Config) { c.DB = "" }, ErrInvalidConfig},
		{"no stream", func(c *Config) { c.Stream.Name = "" }, ErrInvalidConfig},
		{"another stream", func(c *Config) { c.Consumer.Stream = "T" }, ErrInvalidConfig},
		{"a handler", func(c *Config) { c.Consumer.Handler = handler }, ErrInvalidConfig},
		{"hub without leaf", func(c *Config) { c.Hub = &Hub{Stream: "H"} }, ErrInvalidConfig},
		{"hub with nats", func(c *Config) {
			c.Hub, c.Node.Leaf, c.NATS = &Hub{Stream: "H"}, &node.LeafConfig{}, &natsconn.Config{}
		}, ErrInvalidConfig},
		{"hub without its stream", func(c *Config) { c.Hub, c.Node.Leaf = &Hub{}, &node.LeafConfig{} }, ErrInvalidConfig},
		{"hub with subjects", func(c *Config) {
			c.Hub, c.Node.Leaf, c.Stream.Subjects = &Hub{Stream: "H"}, &node.LeafConfig{}, []string{"s.>"}
		}, ErrInvalidConfig},
		{"two sinks", func(c *Config) { c.Effects, c.Sink = &Effects{Subject: "fx"}, RecordOnly("x") }, ErrInvalidConfig},
		{"effects without subject", func(c *Config) { c.Effects = &Effects{} }, ErrInvalidConfig},
		{"negative interval", func(c *Config) { c.Prune.Interval = -1 }, ErrInvalidConfig},
		{"negative workers", func(c *Config) { c.Outbox.Workers = -1 }, ErrInvalidConfig},
		{"batch past the plan's bound", func(c *Config) { c.Consumer.Plan.BatchSize = ackwait.MaxBatchSize + 1 }, ackwait.ErrInvalidPlan},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := base
			tt.edit(&c)
			got, err := c.withDefaults()
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if err == nil && (got.Node.StoreDir != "l.db.nats" || got.Consumer.Stream != "S" || got.Logger == nil) {
				t.Fatalf("defaults not filled in: %+v", got)
			}
		})
	}
	var _ outbox.Sink = RecordOnly("x")
}

// Names a program sets are kept; the others are said as their paths.
func TestNamesDefaultToTheConfigFields(t *testing.T) {
	t.Parallel()
	got, err := Config{DB: "l.db", Stream: stream.Config{Name: "S"}, Names: Names{Settings: map[string]string{"SQL.Schema": "--schema"}}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if s, m, p := got.Names.Say("SQL.Schema"), got.Names.Say("Node.MemoryLimit"), got.Names.Program; s != "--schema" || m != "Node.MemoryLimit" || p != "the program" {
		t.Fatalf("Names say %q, %q, program %q; want --schema, Node.MemoryLimit, the program", s, m, p)
	}
}
