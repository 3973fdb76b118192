package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ensureStream creates the stream when subjects are given and it is missing.
// Without subjects the stream must already exist.
func ensureStream(ctx context.Context, js jetstream.JetStream, name string, subjects []string, dupWindow time.Duration, log *slog.Logger) (*jetstream.StreamInfo, error) {
	s, err := js.Stream(ctx, name)
	if err == nil {
		return s.CachedInfo(), nil
	}
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("look up stream %s: %w", name, err)
	}
	if len(subjects) == 0 {
		return nil, fmt.Errorf("stream %s does not exist; pass --subjects to create it", name)
	}
	s, err = js.CreateStream(ctx, jetstream.StreamConfig{
		Name: name, Subjects: subjects, Storage: jetstream.FileStorage, Duplicates: dupWindow,
	})
	if err != nil {
		return nil, fmt.Errorf("create stream %s: %w", name, err)
	}
	log.Info("created stream", "stream", name, "subjects", subjects, "duplicate_window", dupWindow)
	return s.CachedInfo(), nil
}
