package requeue

import (
	"errors"
	"github.com/jetledger/jetledger/stream"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// A copy carries the dead letter's own headers, not the first publish's
// expectations nor the server's headers (a sourced copy's source, a
// rollup, a marker), whatever their case.
func TestHeadersDropTheFirstPublishsAndTheServers(t *testing.T) {
	t.Parallel()
	h := Headers(map[string][]string{
		"Trace":                         {"abc"},
		jetstream.MsgIDHeader:           {"evt-1"},
		jetstream.ExpectedLastSeqHeader: {"0"},
		"nats-expected-stream":          {"PAY"},
		"Nats-Stream-Source":            {"HUB 1"},
		"Nats-Rollup":                   {"sub"},
		"Nats-Marker-Reason":            {"MaxAge"},
	})
	if len(h) != 2 || h.Get("Trace") != "abc" || h.Get(jetstream.MsgIDHeader) != "evt-1" {
		t.Errorf("Headers = %v, want Trace and Nats-Msg-Id only", h)
	}
}

// The stream a copy goes into: the dead letter's when it captures
// subjects, else the one stream it sources the subject from.
func TestOriginStream(t *testing.T) {
	t.Parallel()
	hub := &jetstream.StreamSource{Name: "HUB", Domain: "hub"}
	tests := []struct {
		name     string
		cfg      jetstream.StreamConfig
		subject  string
		wantInto string
		wantSrc  *jetstream.StreamSource
		wantErr  error
	}{
		{"captures subjects", jetstream.StreamConfig{Name: "PAY", Subjects: []string{"pay.*"}}, "pay.alice", "PAY", nil, nil},
		{"sources one stream", jetstream.StreamConfig{Name: "PAY", Sources: []*jetstream.StreamSource{hub}}, "pay.alice", "HUB", hub, nil},
		{"sources by filter", jetstream.StreamConfig{Name: "PAY", Sources: []*jetstream.StreamSource{
			{Name: "A", FilterSubject: "a.>"}, {Name: "B", FilterSubject: "pay.>"}}}, "pay.alice", "B", nil, nil},
		{"sources two", jetstream.StreamConfig{Name: "PAY", Sources: []*jetstream.StreamSource{{Name: "A"}, {Name: "B"}}}, "pay.alice", "", nil, ErrNoOrigin},
		{"sources none of it", jetstream.StreamConfig{Name: "PAY", Sources: []*jetstream.StreamSource{{Name: "A", FilterSubject: "a.>"}}}, "pay.alice", "", nil, ErrNoOrigin},
		// A durable source's filter is on its consumer; the copy's metadata says it.
		{"durable source, its filter", jetstream.StreamConfig{Name: "PAY", Metadata: map[string]string{stream.MetaSourceFilter: "pay.>"},
			Sources: []*jetstream.StreamSource{{Name: "HUB", Consumer: &jetstream.StreamConsumerSource{Name: "c", DeliverSubject: "d"}}}}, "pay.alice", "HUB", nil, nil},
		{"durable source, not its filter", jetstream.StreamConfig{Name: "PAY", Metadata: map[string]string{stream.MetaSourceFilter: "a.>"},
			Sources: []*jetstream.StreamSource{{Name: "HUB", Consumer: &jetstream.StreamConsumerSource{Name: "c", DeliverSubject: "d"}}}}, "pay.alice", "", nil, ErrNoOrigin},
	}
	for _, tc := range tests {
		into, src, err := originStream(tc.cfg, tc.subject)
		if !errors.Is(err, tc.wantErr) || into != tc.wantInto || tc.wantSrc != nil && src != tc.wantSrc {
			t.Errorf("%s: originStream = %q, %v, %v; want %q, %v", tc.name, into, src, err, tc.wantInto, tc.wantErr)
		}
	}
}
