package service

import (
	"errors"
	"testing"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/node"
	"github.com/jetledger/jetledger/stream"
)

// testNames are a command line's names for the settings the tests refuse.
var testNames = Names{Program: "run", Settings: map[string]string{"DB": "--db", "Stream.Name": "--stream", "Stream.Subjects": "--subjects",
	"Consumer.Durable": "--durable", "Consumer.MaxDeliver": "--max-deliver", "Consumer.Plan.Deadline": "--deadline", "Consumer.Plan.BatchSize": "--batch",
	"Stream.Limits.MaxAge": "--max-age", "Hub": "--hub-url", "Node.MemoryLimit": "--memory-limit", "Ledger.MaxSizeBytes": "--db-max-size",
	"SchemaFile": "--schema", "Prune.Retention": "--retention", "MetricsAddr": "--metrics", "Partitions.Count": "--partitions",
	"Partitions.Key": "--partition-key", "Partitions.Named": "--partition", "Hub.Filter": "--hub-filter"}}

// Validate refuses every setting a run cannot take, in the caller's words.
func TestValidateSaysTheCallersNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		edit    func(*Config)
		wantErr error
		want    string
	}{
		{"defaults", func(*Config) {}, nil, ""},
		{"zero deadline given", func(c *Config) { c.Explicit = true }, ackwait.ErrInvalidPlan, "--deadline 0s: want more than 0 and at most 24h0m0s"},
		{"negative deadline", func(c *Config) { c.Consumer.Plan.Deadline = -time.Second }, ackwait.ErrInvalidPlan, "--deadline -1s: want more than 0 and at most 24h0m0s"},
		{"batch too large", func(c *Config) { c.Consumer.Plan.BatchSize = ackwait.MaxBatchSize + 1 }, ackwait.ErrInvalidPlan, "--batch 100001: want 1 to 100000"},
		{"no db", func(c *Config) { c.DB = "" }, ErrInvalidConfig, "--db needs a file path"},
		{"db with a query", func(c *Config) { c.DB = "a?b" }, ErrInvalidConfig, `--db "a?b": the path of a database file may not contain '?' or '#'`},
		{"dotted stream", func(c *Config) { c.Stream.Name, c.Consumer.Stream = "a.b", "a.b" }, stream.ErrInvalidConfig, `--stream "a.b": a NATS name may not contain '.', '*', '>', '/', '\' or whitespace`},
		{"dotted durable", func(c *Config) { c.Consumer.Durable = "d.x" }, stream.ErrInvalidConfig, `--durable "d.x": a NATS name may not contain '.', '*', '>', '/', '\' or whitespace`},
		{"small memory", func(c *Config) { c.Node.MemoryLimit = 1 << 20 }, node.ErrMemoryLimit, "--memory-limit 1MiB: want at least"},
		{"limits of no stream created", func(c *Config) { c.Stream.Limits.MaxAge = time.Hour }, ErrInvalidConfig,
			"--max-age applies to the stream run creates (with --subjects or --hub-url); give one, or set an existing stream's limits with nats stream edit"},
		{"max deliver", func(c *Config) { c.Consumer.MaxDeliver = -2 }, ErrInvalidConfig, "--max-deliver -2: want a positive number or -1"},
		{"small cap", func(c *Config) { c.Ledger.MaxSizeBytes = 1024 }, ErrInvalidConfig, "--db-max-size 1KiB: want at least 128KiB"},
		{"no schema", func(c *Config) { c.SchemaFile = "no-such.sql" }, ErrInvalidConfig, "--schema: stat no-such.sql: no such file or directory"},
		{"negative retention", func(c *Config) { c.Prune.Retention = -time.Hour }, ErrInvalidConfig, "--retention -1h0m0s: must not be negative"},
		{"metrics without port", func(c *Config) { c.MetricsAddr = "9464" }, ErrInvalidConfig, `--metrics "9464": want host:port`},
		{"metrics port", func(c *Config) { c.MetricsAddr = "h:99999" }, ErrInvalidConfig, `--metrics "h:99999": the port must be a number from 0 to 65535`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := Config{DB: "l.db", Stream: stream.Config{Name: "S"}, Names: testNames}
			tt.edit(&c)
			err := c.Validate()
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			var ce *ConfigError
			if tt.wantErr != nil && (!errors.As(err, &ce) || len(ce.Reason) < len(tt.want) || ce.Reason[:len(tt.want)] != tt.want) {
				t.Fatalf("%v: want a *ConfigError starting %q", err, tt.want)
			}
		})
	}
}

// Partitions are refused before any I/O, in the caller's words too.
func TestPartitionsValidate(t *testing.T) {
	t.Parallel()
	one := Config{DB: "l.db", Stream: stream.Config{Name: "S", Subjects: []string{"pay.*"}}, Names: testNames, Explicit: true,
		Consumer: consumer.Config{Plan: ackwait.Plan{}.WithDefaults()}}
	tests := []struct {
		name string
		p    Partitions
		edit func(*Config)
		want string // "": accepted
	}{
		{"fine", Partitions{Count: 4, Key: 1, Named: []int{0, 3}}, nil, ""},
		{"existing stream", Partitions{Named: []int{0}}, func(c *Config) { c.Explicit, c.Stream.Subjects = false, nil }, ""},
		{"one", Partitions{Count: 1, Key: 1}, nil, "--partitions 1 is no partitioning; leave the flag out, or give 2 or more"},
		{"negative", Partitions{Count: -1}, nil, "--partitions -1: want a positive number"},
		{"two subjects", Partitions{Count: 2, Key: 1}, func(c *Config) { c.Stream.Subjects = []string{"a.*", "b.*"} },
			"--partitions needs --subjects with exactly one subject (the stream's partition mapping has one source)"},
		{"zero key given", Partitions{Count: 2}, nil, "--partition-key 0: want the position of a '*' token, from 1"},
		{"key past the wildcards", Partitions{Count: 2, Key: 2}, nil,
			`--partition-key 2: --subjects "pay.*" has 1 '*' tokens; the key must be one of them, such as orders.*.> with the customer in the '*'`},
		{"wildcard not last", Partitions{Count: 2, Key: 1}, func(c *Config) { c.Stream.Subjects = []string{"pay.>.*"} }, `--subjects "pay.>.*": '>' must be the last token`},
		{"past the count", Partitions{Count: 2, Key: 1, Named: []int{2}}, nil, "--partition 2: the stream has --partitions 2, numbered 0 to 1"},
		{"negative named", Partitions{Named: []int{-1}}, nil, "--partition -1: partitions count from 0"},
		{"twice", Partitions{Named: []int{1, 1}}, nil, "--partition 1 is given twice"},
		{"metrics", Partitions{Named: []int{0, 1}}, func(c *Config) { c.MetricsAddr = "127.0.0.1:0" },
			"--metrics serves one consumer: with partitions give one --partition per process (or leave out --metrics)"},
		{"hub", Partitions{Named: []int{0}}, func(c *Config) { c.Hub = &Hub{Stream: "H"} },
			"--partitions/--partition and --hub-url do not go together: partition the hub's stream, and give each site its share with --hub-filter"},
	}
	for _, tt := range tests {
		c := one
		if tt.edit != nil {
			tt.edit(&c)
		}
		err := tt.p.Validate(c)
		var ce *ConfigError
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (!errors.As(err, &ce) || !errors.Is(err, ErrInvalidConfig) || ce.Reason != tt.want):
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}

// A partition's config is the one config's, with its ledger, durable and
// share, on the shared server.
func TestPartitionConfigDerivesFromOne(t *testing.T) {
	t.Parallel()
	base := Config{DB: "/d/ledger.db", MetricsAddr: "127.0.0.1:0", Logger: quiet, Stream: stream.Config{Name: "S", Subjects: []string{"pay.*"}},
		Consumer: consumer.Config{Durable: "d"}}
	p := Partition{Index: 1, DB: "/d/ledger-p1.db", Durable: "d-p1", Filter: "1.>"}
	got := p.Config(base)
	if got.DB != p.DB || got.Consumer.Durable != "d-p1" || len(got.Consumer.FilterSubjects) != 1 || got.Stream.Subjects != nil || got.MetricsAddr != base.MetricsAddr {
		t.Fatalf("partition config %+v", got)
	}
}
