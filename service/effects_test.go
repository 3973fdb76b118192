package service

import (
	"context"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats.go/jetstream"
)

// Effects with no Timeout takes natssink's default, for the effects
// stream it creates too: a message applied is published to that stream.
func TestEffectsTimeoutDefaults(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	cfg.Effects = &Effects{Subject: "fx.s", Stream: "FX"}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	if _, err := s.JetStream().Publish(ctx, "s.x", []byte(`{}`), jetstream.WithMsgID("m1")); err != nil {
		t.Fatal(err)
	}
	consumertest.Eventually(t, 30*time.Second, "the effect in FX", func() bool {
		select {
		case err := <-done:
			t.Fatalf("Run returned before the effect was sent: %v", err)
		default:
		}
		fx, err := s.JetStream().Stream(ctx, "FX")
		if err != nil {
			return false
		}
		info, err := fx.Info(ctx)
		return err == nil && info.State.Msgs == 1
	})
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}
