package service

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/group"
	"github.com/jetledger/jetledger/health"
)

// A partition no member owns needs a person once it has been so past the
// grace (a take-over's time), not before; owned again, it no longer does.
func TestGroupMetricsSayAPartitionWithoutAnOwnerPastTheGrace(t *testing.T) {
	t.Parallel()
	nc, _ := consumertest.Connect(t, consumertest.RunServer(t))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Metrics: l, Logger: slog.New(slog.DiscardHandler)}
	cfg.Stream.Name = "S"
	grace := 50 * time.Millisecond
	m, err := serveGroup(&cfg, nc, Group{Name: "g"}, grace)
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	a := group.Assignment{Partitions: 2}
	owner := map[string]group.Record{"a": {Parts: map[int]group.Part{0: {Role: string(changelog.RoleOwner)}}}}
	m.observe(2, a, owner, nil, 0)
	if err := m.check(context.Background()); err != nil {
		t.Fatalf("partition 1 just seen without an owner: %v, want nothing yet (the grace)", err)
	}
	consumertest.Eventually(t, time.Minute, "attention past the grace", func() bool {
		m.observe(2, a, owner, nil, 0)
		var need *health.AttentionError
		return errors.As(m.check(context.Background()), &need) && need.Needs[0].Kind == NeedOwnerless && need.Needs[0].Count == 1
	})
	owner["b"] = group.Record{Parts: map[int]group.Part{1: {Role: string(changelog.RoleTaking)}}}
	m.observe(2, a, owner, nil, 0)
	if err := m.check(context.Background()); err != nil {
		t.Fatalf("both partitions owned: %v", err)
	}
}
