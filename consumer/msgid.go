package consumer

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// MaxMessageIDLen bounds Nats-Msg-Id: the id is stored in every ledger row
// and its index, so a runaway id would bloat the ledger for good.
const MaxMessageIDLen = 512

// SequenceID is the id a message without Nats-Msg-Id gets when sequence ids
// are allowed: "<stream>@<created>/<seq>", where created is the stream's
// creation time in Unix nanoseconds. The creation time names the stream
// instance: a stream deleted and re-created starts again at sequence 1, and
// its messages must not meet the old ones' ledger rows.
func SequenceID(stream string, created time.Time, seq uint64) string {
	return fmt.Sprintf("%s/%d", StreamInstance(stream, created), seq)
}

// StreamInstance names one instance of a stream, "<stream>@<created>" with
// created in Unix nanoseconds: a stream deleted and made again, or another
// server's stream of the same name, is another instance (DESIGN.md rule 13).
func StreamInstance(stream string, created time.Time) string {
	return fmt.Sprintf("%s@%d", stream, created.UnixNano())
}

// MessageID reads a delivery's id from its headers. Without Nats-Msg-Id it
// is ErrMissingMsgID, unless allowSeq, when SequenceID(stream, created, seq)
// stands in. An id longer than MaxMessageIDLen is ErrBadMsgID. Any other
// bytes are accepted as they are: the ledger compares ids exactly.
func MessageID(h nats.Header, stream string, created time.Time, seq uint64, allowSeq bool) (string, error) {
	id := h.Get(jetstream.MsgIDHeader)
	switch {
	case id == "" && allowSeq:
		return SequenceID(stream, created, seq), nil
	case id == "":
		return "", ErrMissingMsgID
	case len(id) > MaxMessageIDLen:
		return "", fmt.Errorf("%w: %d bytes, at most %d", ErrBadMsgID, len(id), MaxMessageIDLen)
	}
	return id, nil
}
