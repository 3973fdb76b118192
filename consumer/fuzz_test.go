package consumer_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/nats-io/nats.go"
)

// FuzzMessageID feeds raw NATS header blocks, as they arrive on the wire,
// through the header decoder and MessageID: no panic, and an accepted id is
// exactly the header's value, non-empty and within the limit.
func FuzzMessageID(f *testing.F) {
	f.Add([]byte("NATS/1.0\r\nNats-Msg-Id: 01J0000000000000000000000A\r\n\r\n"), false)
	f.Add([]byte("NATS/1.0\r\n\r\n"), false)
	f.Add([]byte("NATS/1.0\r\n\r\n"), true)
	f.Add([]byte("NATS/1.0\r\nNats-Msg-Id:\r\n\r\n"), false)
	f.Add([]byte("NATS/1.0\r\nnats-msg-id: lower\r\nNats-Msg-Id: second\r\n\r\n"), false)
	f.Add([]byte("NATS/1.0 503\r\n\r\n"), false)
	f.Fuzz(func(t *testing.T, raw []byte, allowSeq bool) {
		h, err := nats.DecodeHeadersMsg(raw)
		if err != nil {
			return // the client drops such a message before we see it
		}
		created := time.Unix(1, 2)
		id, err := consumer.MessageID(h, "S", created, 7, allowSeq)
		v := h.Get("Nats-Msg-Id")
		switch {
		case err == nil && v == "" && (!allowSeq || id != consumer.SequenceID("S", created, 7)):
			t.Fatalf("id %q accepted without a header", id)
		case err == nil && v != "" && (id != v || len(id) > consumer.MaxMessageIDLen):
			t.Fatalf("id %q from header %q", id, v)
		case err != nil && !errors.Is(err, consumer.ErrMissingMsgID) && !errors.Is(err, consumer.ErrBadMsgID):
			t.Fatalf("unexpected error %v", err)
		}
	})
}
