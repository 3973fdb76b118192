package stream

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/ledger"
)

// ServedInstance is the instance of stream that was last recorded in st
// (consumer.StreamInstance), or "" when none was: a ledger of an older
// release, or one only replay has written.
func ServedInstance(ctx context.Context, st *ledger.Store, stream string) (string, error) {
	cs, err := st.Consumers(ctx)
	if err != nil {
		return "", fmt.Errorf("stream: served instance of %s: %w", stream, err)
	}
	for _, c := range cs { // the one seen last first
		if c.Stream == stream && c.StreamInstance != "" {
			return c.StreamInstance, nil
		}
	}
	return "", nil
}

// CheckServed refuses (*NotTheInstanceError) a stream created at created that
// is another instance than the one last consumed into st: another server's
// stream of the same name, or one deleted and made again since. Replay
// would apply its messages into the ledger, and prune would go by its
// sequences, which say nothing of the ledger's rows. A ledger that names no
// instance passes. names are the error's (NotTheInstanceError.Names).
func CheckServed(ctx context.Context, st *ledger.Store, stream string, created time.Time, names map[string]string) error {
	have, err := ServedInstance(ctx, st, stream)
	if err != nil || have == "" || have == consumer.StreamInstance(stream, created) {
		return err
	}
	return &NotTheInstanceError{Stream: stream, Created: created, Served: InstanceCreated(have), Names: names}
}

// WarnNewInstance says, at start, that stream is another instance than the
// one last consumed into st: one made again (an operator's choice, or an
// edge's copy made again) or another server's.
func WarnNewInstance(ctx context.Context, log *slog.Logger, st *ledger.Store, stream string, created time.Time) {
	have, err := ServedInstance(ctx, st, stream)
	if err == nil && have != "" && have != consumer.StreamInstance(stream, created) {
		log.WarnContext(ctx, "the stream is another instance than the one this ledger served last: it was made again, or this is another server's; its messages are deduplicated by id as ever",
			"stream", stream, "created", created.UTC(), "served_created", InstanceCreated(have))
	}
}

// InstanceCreated is the creation time an instance name carries, for
// messages; the name itself when it carries none.
func InstanceCreated(instance string) string {
	i := strings.LastIndexByte(instance, '@')
	n, err := strconv.ParseInt(instance[i+1:], 10, 64)
	if i < 0 || err != nil {
		return instance
	}
	return time.Unix(0, n).UTC().Format(time.RFC3339Nano)
}
