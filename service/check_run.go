package service

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/jetledger/jetledger/ackwait"
	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/node"
	"github.com/jetledger/jetledger/stream"
)

// refusef is a *ConfigError of the reason format says.
func refusef(format string, a ...any) error { return &ConfigError{Reason: fmt.Sprintf(format, a...)} }

// checkRun refuses, before any I/O, the consumer's settings that a run
// would refuse later or cannot live with, in the order a command line's
// flags are checked, each named as Names says.
func (c Config) checkRun() error {
	n := c.Names
	if err := c.checkPlan(); err != nil {
		return err
	}
	// ledger.Open refuses it too, but only once a server may be running.
	if err := ledger.CheckPath(c.DB, n.Say("DB")); err != nil {
		return asRefusal(err)
	}
	if err := c.checkStream(); err != nil {
		return err
	}
	switch md := c.Consumer.MaxDeliver; {
	case md < -1 || c.Explicit && md == 0:
		return refusef("%s %d: want a positive number or -1", n.Say("Consumer.MaxDeliver"), md)
	case c.Ledger.MaxSizeBytes < 0 || c.Ledger.MaxSizeBytes > 0 && c.Ledger.MaxSizeBytes < ledger.MinSizeBytes:
		return refusef("%s %s: want at least %s (a new ledger's schema with room for its first batches), or 0 for no cap",
			n.Say("Ledger.MaxSizeBytes"), node.ByteSize(c.Ledger.MaxSizeBytes), node.ByteSize(ledger.MinSizeBytes))
	}
	if c.SchemaFile != "" {
		if _, err := os.Stat(c.SchemaFile); err != nil {
			return &ConfigError{Reason: n.Say("SchemaFile") + ": " + err.Error(), Err: err}
		}
	}
	if err := CheckPrune(c.Prune, n); err != nil {
		return err
	}
	if c.SummaryInterval < 0 {
		return refusef("%s %s: must not be negative", n.Say("SummaryInterval"), c.SummaryInterval)
	}
	if c.MetricsAddr != "" {
		if _, _, err := HostPort(n.Say("MetricsAddr"), c.MetricsAddr); err != nil {
			return err
		}
	}
	return c.checkMetricsTLS()
}

// checkMetricsTLS refuses half a TLS pair for the metrics, or a file
// that is not there.
func (c *Config) checkMetricsTLS() error {
	n := c.Names
	switch {
	case (c.MetricsCert == "") != (c.MetricsKey == ""):
		return refusef("%s and %s go together", n.Say("MetricsCert"), n.Say("MetricsKey"))
	case c.MetricsCert != "" && c.Metrics == nil && c.MetricsAddr == "":
		return refusef("%s needs %s", n.Say("MetricsCert"), n.Say("MetricsAddr"))
	}
	for _, f := range []struct{ name, file string }{{"MetricsCert", c.MetricsCert}, {"MetricsKey", c.MetricsKey}} {
		if _, err := os.Stat(f.file); f.file != "" && err != nil {
			return &ConfigError{Reason: n.Say(f.name) + ": " + err.Error(), Err: err}
		}
	}
	return nil
}

// checkPlan refuses a Consumer.Plan field out of its bounds, and with
// Explicit a zero one.
func (c Config) checkPlan() error {
	p := c.Consumer.Plan
	for _, d := range []struct {
		path string
		v    time.Duration
	}{{"Consumer.Plan.Deadline", p.Deadline}, {"Consumer.Plan.BufferWait", p.BufferWait},
		{"Consumer.Plan.CommitMargin", p.CommitMargin}, {"Consumer.Plan.AckMargin", p.AckMargin}} {
		if d.v < 0 || d.v > ackwait.MaxDuration || c.Explicit && d.v == 0 {
			return &ConfigError{Reason: fmt.Sprintf("%s %s: want more than 0 and at most %s", c.Names.Say(d.path), d.v, ackwait.MaxDuration),
				Err: ackwait.ErrInvalidPlan}
		}
	}
	if b := p.BatchSize; b < 0 || b > ackwait.MaxBatchSize || c.Explicit && b == 0 {
		return &ConfigError{Reason: fmt.Sprintf("%s %d: want 1 to %d", c.Names.Say("Consumer.Plan.BatchSize"), b, ackwait.MaxBatchSize),
			Err: ackwait.ErrInvalidPlan}
	}
	// The fields no caller names (PerMessage) too, in the plan's words.
	if err := p.Check(); err != nil {
		return &ConfigError{Reason: "Consumer.Plan: " + err.Error(), Err: err}
	}
	return nil
}

// checkStream refuses the stream's and the durable's names, the stream's
// settings (stream.Config.Check), a memory limit too small to live in,
// and limits for a stream the run does not create.
func (c Config) checkStream() error {
	n := c.Names
	err := c.Stream.Check()
	if err == nil && c.Consumer.Durable != "" {
		err = stream.CheckName(n.Say("Consumer.Durable"), c.Consumer.Durable)
	}
	if ce := (*stream.ConfigError)(nil); errors.As(err, &ce) {
		return &ConfigError{Reason: ce.Reason, Err: err}
	}
	if err := node.CheckMemoryLimit(c.Node.MemoryLimit); errors.Is(err, node.ErrMemoryLimit) {
		return &ConfigError{Reason: fmt.Sprintf("%s %s: want at least %s (about %s is code and SQLite outside the Go runtime, and the embedded server needs the rest)",
			n.Say("Node.MemoryLimit"), c.Node.MemoryLimit, node.MemoryLimitMin, node.MemoryReserve), Err: err}
	}
	if l := c.Stream.Limits.Set(); l != "" && len(c.Stream.Subjects) == 0 && c.Hub == nil {
		return refusef("%s applies to the stream %s creates (with %s or %s); give one, or set an existing stream's limits with nats stream edit",
			n.Say("Stream.Limits."+l), n.Program, n.Say("Stream.Subjects"), n.Say("Hub"))
	}
	return nil
}

// HostPort reads the host:port of addr, which the refusal (a
// *ConfigError) calls setting; port 0 picks a free port.
func HostPort(setting, addr string) (host string, port int, err error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, refusef("%s %q: want host:port", setting, addr)
	}
	port, err = strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, refusef("%s %q: the port must be a number from 0 to 65535", setting, addr)
	}
	return host, port, nil
}

// load reads SchemaFile into SQL.Schema, a failure a *ConfigError as
// Validate's stat of it is.
func (c *Config) load() error {
	if c.SchemaFile == "" || c.SQL.Schema != "" {
		return nil
	}
	b, err := os.ReadFile(c.SchemaFile)
	if err != nil {
		return &ConfigError{Reason: c.Names.Say("SchemaFile") + ": " + err.Error(), Err: err}
	}
	c.SQL.Schema = string(b)
	if c.SQL.SchemaName == "" {
		c.SQL.SchemaName = c.SchemaFile
	}
	return nil
}

// CheckPlan refuses p as Validate refuses Config.Consumer.Plan: a field
// out of its bounds, and with explicit a zero one, named as n says.
func CheckPlan(p ackwait.Plan, explicit bool, n Names) error {
	return Config{Consumer: consumer.Config{Plan: p}, Explicit: explicit, Names: n.withDefaults()}.checkPlan()
}

// CheckPrune refuses p as Validate refuses Config.Prune: a negative
// duration, named as n says (Prune.Retention, say).
func CheckPrune(p Prune, n Names) error {
	for _, d := range []struct {
		path string
		v    time.Duration
	}{{"Prune.Retention", p.Retention}, {"Prune.OutboxRetention", p.OutboxRetention}, {"Prune.Interval", p.Interval}} {
		if d.v < 0 {
			return refusef("%s %s: must not be negative", n.Say(d.path), d.v)
		}
	}
	return nil
}

// noStream is ErrNoStream for err, stream.ErrNotFound of c.Stream.
func (c Config) noStream(err error) error {
	return &NoStreamError{Stream: c.Stream.Name, Subjects: c.Names.Say("Stream.Subjects"), Err: err}
}
