package stream

import (
	"context"
	"log/slog"

	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// SourceStart is sourceStart with the Go API's names, for the tests of
// package stream_test.
func SourceStart(ctx context.Context, js jetstream.JetStream, stream string, src *jetstream.StreamSource, startSeq uint64, st *ledger.Store, log *slog.Logger) (uint64, error) {
	return sourceStart(ctx, js, stream, src, startSeq, st, log, nil)
}
