package webhook_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/jetledger/jetledger/consumer/outbox/webhook"
)

// FuzzExternalID parses arbitrary response bodies and headers: no panic,
// never an empty id, and the header wins when present.
func FuzzExternalID(f *testing.F) {
	f.Add([]byte(`{"id":"ext-1"}`), "", "id")
	f.Add([]byte(`{"id":12345678901234567890}`), "", "id")
	f.Add([]byte(`{"id":{"nested":true}}`), "", "id")
	f.Add([]byte(`[1,2,3]`), "", "id")
	f.Add([]byte(`{"id":"   "}`), "hdr", "id")
	f.Add([]byte("\xff\xfe"), "", "")
	f.Fuzz(func(t *testing.T, body []byte, header, field string) {
		h := http.Header{}
		name := ""
		if header != "" {
			h.Set("X-Id", header)
			name = "X-Id"
		}
		id := webhook.ExternalID(h, body, name, field, "fallback")
		if id == "" {
			t.Fatal("empty external id")
		}
		if v := strings.TrimSpace(h.Get("X-Id")); v != "" && id != v {
			t.Fatalf("header %q present but id %q", v, id)
		}
	})
}
