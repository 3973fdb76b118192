package service

import (
	"errors"
	"strings"
	"testing"

	"github.com/jetledger/jetledger/node"
	"github.com/nats-io/nats.go/jetstream"
)

// A stream that allows rollups is refused with publishers on the embedded
// server: one publish with Nats-Rollup: all would purge it.
func TestPublishersRefuseAStreamThatAllowsRollups(t *testing.T) {
	t.Parallel()
	c := Config{Node: node.Config{Publishers: node.PublishRole{Tokens: []string{"p"}}}, Names: Names{Settings: map[string]string{"Node.Publishers.Tokens": "--publisher-token-file"}}}
	c.Names = c.Names.withDefaults()
	err := c.checkPublishers(jetstream.StreamConfig{Name: "EV", AllowRollup: true})
	var ce *ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "--publisher-token-file") || !strings.Contains(err.Error(), "--no-allow-rollup") {
		t.Fatalf("rollups with publishers: %v", err)
	}
	if err := c.checkPublishers(jetstream.StreamConfig{Name: "EV"}); err != nil {
		t.Fatalf("no rollups: %v", err)
	}
	c.Node.Publishers.Tokens = nil
	if err := c.checkPublishers(jetstream.StreamConfig{Name: "EV", AllowRollup: true}); err != nil {
		t.Fatalf("rollups without publishers: %v", err)
	}
}
