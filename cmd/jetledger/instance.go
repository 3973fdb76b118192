package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/ledger"
)

// errOtherInstance: the server's stream of the name a ledger served is not
// the instance run last consumed into it.
var errOtherInstance = errors.New("the server's stream of that name is not the one this ledger served")

// servedInstance is the instance of stream that run last recorded in st
// (consumer.StreamInstance), or "" when none was: a ledger of an older
// release, or one only replay has written.
func servedInstance(ctx context.Context, st *ledger.Store, stream string) (string, error) {
	cs, err := st.Consumers(ctx)
	if err != nil {
		return "", err
	}
	for _, c := range cs { // the one seen last first
		if c.Stream == stream && c.StreamInstance != "" {
			return c.StreamInstance, nil
		}
	}
	return "", nil
}

// checkServedInstance refuses a stream created at created that is another
// instance than the one run last consumed into st: another server's stream
// of the same name (a wrong --nats or context), or one deleted and made
// again since. Replay would apply its messages into the ledger, and prune
// would go by its sequences, which say nothing of the ledger's rows.
func checkServedInstance(ctx context.Context, st *ledger.Store, stream string, created time.Time) error {
	have, err := servedInstance(ctx, st, stream)
	if err != nil || have == "" || have == consumer.StreamInstance(stream, created) {
		return err
	}
	return fmt.Errorf("%w: stream %s here was created %s, the one this ledger served %s (another server's stream of that name, or one made again since): point --nats at the server run consumes, or run on this stream first, which records it",
		errOtherInstance, stream, created.UTC().Format(time.RFC3339Nano), instanceCreated(have))
}

// warnNewInstance says, at start, that run consumes another instance of
// stream than it did last time: one made again (an operator's choice, or an
// edge's copy made again) or another server's.
func warnNewInstance(ctx context.Context, log *slog.Logger, st *ledger.Store, stream string, created time.Time) {
	have, err := servedInstance(ctx, st, stream)
	if err == nil && have != "" && have != consumer.StreamInstance(stream, created) {
		log.WarnContext(ctx, "the stream is another instance than the one this ledger served last: it was made again, or this is another server's; its messages are deduplicated by id as ever",
			"stream", stream, "created", created.UTC(), "served_created", instanceCreated(have))
	}
}

// instanceCreated is the creation time an instance name carries, for
// messages.
func instanceCreated(instance string) string {
	i := strings.LastIndexByte(instance, '@')
	n, err := strconv.ParseInt(instance[i+1:], 10, 64)
	if i < 0 || err != nil {
		return instance
	}
	return time.Unix(0, n).UTC().Format(time.RFC3339Nano)
}
