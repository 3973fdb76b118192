package consumer

import (
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// MaxMessageIDLen bounds Nats-Msg-Id: the id is stored in every ledger row
// and its index, so a runaway id would bloat the ledger for good.
const MaxMessageIDLen = 512

// MessageID reads a delivery's id from its headers. Without Nats-Msg-Id it
// is ErrMissingMsgID, unless allowSeq, when "<stream>/<seq>" stands in. An id
// longer than MaxMessageIDLen is ErrBadMsgID. Any other bytes are accepted
// as they are: the ledger compares ids exactly.
func MessageID(h nats.Header, stream string, seq uint64, allowSeq bool) (string, error) {
	id := h.Get(jetstream.MsgIDHeader)
	switch {
	case id == "" && allowSeq:
		return fmt.Sprintf("%s/%d", stream, seq), nil
	case id == "":
		return "", ErrMissingMsgID
	case len(id) > MaxMessageIDLen:
		return "", fmt.Errorf("%w: %d bytes, at most %d", ErrBadMsgID, len(id), MaxMessageIDLen)
	}
	return id, nil
}
