package signature_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/outbox/webhook/signature"
)

var (
	at   = time.Unix(1_700_000_000, 0)
	body = []byte(`{"charge":1}`)
)

// signed is a request as the webhook sink sends it at at, signed with
// secrets: v2 entries, then v1 entries.
func signed(secrets []string, key, msgID string) http.Header {
	ts := signature.Timestamp(at)
	h := http.Header{}
	h.Set(signature.HeaderTimestamp, ts)
	h.Set(signature.HeaderIdempotencyKey, key)
	h.Set(signature.HeaderMessageID, msgID)
	h.Set(signature.HeaderSignature, signature.Sign(secrets, ts, key, msgID, body)+", "+signature.SignV1(secrets, ts, body))
	return h
}

func verifier(secrets ...string) signature.Verifier {
	return signature.Verifier{Secrets: secrets, Now: func() time.Time { return at }}
}

// The v2 string is the documented one, byte for byte: a receiver in
// another language rebuilds it from the package doc.
func TestSignIsTheDocumentedHMAC(t *testing.T) {
	t.Parallel()
	m := hmac.New(sha256.New, []byte("s3cret"))
	m.Write([]byte("v2\n1700000000\n01KEY\nmsg-1\n" + string(body)))
	v2 := "v2=" + hex.EncodeToString(m.Sum(nil))
	m = hmac.New(sha256.New, []byte("s3cret"))
	m.Write([]byte("1700000000." + string(body)))
	v1 := "v1=" + hex.EncodeToString(m.Sum(nil))
	if got := signature.Sign([]string{"s3cret"}, "1700000000", "01KEY", "msg-1", body); got != v2 {
		t.Fatalf("Sign = %q, want %q", got, v2)
	}
	if got := signature.SignV1([]string{"s3cret"}, "1700000000", body); got != v1 {
		t.Fatalf("SignV1 = %q, want %q", got, v1)
	}
	if got := signature.Sign([]string{"a", "b"}, "1", "k", "m", body); strings.Count(got, "v2=") != 2 || strings.Count(got, ", ") != 1 {
		t.Fatalf("Sign with two secrets = %q, want two comma-separated v2 entries", got)
	}
}

// Each signed field moved, changed or dropped is refused; the untouched
// request passes.
func TestVerify(t *testing.T) {
	t.Parallel()
	const key, msgID = "01KEY", "msg-1"
	tests := []struct {
		name    string
		v       signature.Verifier
		edit    func(h http.Header)
		body    string // "" is body
		wantErr error
	}{
		{name: "as signed", v: verifier("s3cret")},
		{name: "one of two secrets", v: verifier("other", "s3cret")},
		{name: "no secret matches", v: verifier("guess"), wantErr: signature.ErrBadSignature},
		{name: "tampered body", v: verifier("s3cret"), body: `{"charge":100}`, wantErr: signature.ErrBadSignature},
		{name: "tampered key", v: verifier("s3cret"), edit: func(h http.Header) { h.Set(signature.HeaderIdempotencyKey, "01OTHER") }, wantErr: signature.ErrBadSignature},
		{name: "key dropped", v: verifier("s3cret"), edit: func(h http.Header) { h.Del(signature.HeaderIdempotencyKey) }, wantErr: signature.ErrBadSignature},
		{name: "tampered message id", v: verifier("s3cret"), edit: func(h http.Header) { h.Set(signature.HeaderMessageID, "msg-2") }, wantErr: signature.ErrBadSignature},
		{name: "key and message id shifted across the separator", v: verifier("s3cret"), edit: func(h http.Header) {
			h.Set(signature.HeaderIdempotencyKey, key+"m")
			h.Set(signature.HeaderMessageID, strings.TrimPrefix(msgID, "m"))
		}, wantErr: signature.ErrBadSignature},
		{name: "tampered timestamp", v: verifier("s3cret"), edit: func(h http.Header) { h.Set(signature.HeaderTimestamp, signature.Timestamp(at.Add(time.Second))) }, wantErr: signature.ErrBadSignature},
		{name: "key given twice", v: verifier("s3cret"), edit: func(h http.Header) { h.Add(signature.HeaderIdempotencyKey, "01OTHER") }, wantErr: signature.ErrMalformed},
		{name: "line break in the message id", v: verifier("s3cret"), edit: func(h http.Header) { h.Set(signature.HeaderMessageID, "msg\n-1") }, wantErr: signature.ErrMalformed},
		{name: "no signature header", v: verifier("s3cret"), edit: func(h http.Header) { h.Del(signature.HeaderSignature) }, wantErr: signature.ErrNoSignature},
		{name: "empty signature header", v: verifier("s3cret"), edit: func(h http.Header) { h.Set(signature.HeaderSignature, " , ") }, wantErr: signature.ErrNoSignature},
		{name: "only an unknown version", v: verifier("s3cret"), edit: func(h http.Header) { h.Set(signature.HeaderSignature, "v9=abc") }, wantErr: signature.ErrNoSignature},
		{name: "an unknown version beside v2 is skipped", v: verifier("s3cret"), edit: func(h http.Header) { h.Add(signature.HeaderSignature, "v9=later") }},
		{name: "only v1", v: verifier("s3cret"), edit: keepOnly("v1="), wantErr: signature.ErrOnlyV1},
		{name: "only v1, allowed", v: signature.Verifier{Secrets: []string{"s3cret"}, AllowV1: true, Now: func() time.Time { return at }}, edit: keepOnly("v1=")},
		{name: "only v1, allowed, tampered body", v: signature.Verifier{Secrets: []string{"s3cret"}, AllowV1: true, Now: func() time.Time { return at }},
			edit: keepOnly("v1="), body: "{}", wantErr: signature.ErrBadSignature},
		{name: "v1 allowed does not rescue a bad v2", v: signature.Verifier{Secrets: []string{"s3cret"}, AllowV1: true, Now: func() time.Time { return at }},
			edit: func(h http.Header) { h.Set(signature.HeaderIdempotencyKey, "01OTHER") }, wantErr: signature.ErrBadSignature},
		{name: "no timestamp", v: verifier("s3cret"), edit: func(h http.Header) { h.Del(signature.HeaderTimestamp) }, wantErr: signature.ErrBadTimestamp},
		{name: "signed timestamp", v: verifier("s3cret"), edit: func(h http.Header) { h.Set(signature.HeaderTimestamp, "+1700000000") }, wantErr: signature.ErrBadTimestamp},
		{name: "timestamp not a number", v: verifier("s3cret"), edit: func(h http.Header) { h.Set(signature.HeaderTimestamp, "yesterday") }, wantErr: signature.ErrBadTimestamp},
		{name: "timestamp too large", v: verifier("s3cret"), edit: func(h http.Header) { h.Set(signature.HeaderTimestamp, strings.Repeat("9", 40)) }, wantErr: signature.ErrBadTimestamp},
		{name: "timestamp given twice", v: verifier("s3cret"), edit: func(h http.Header) { h.Add(signature.HeaderTimestamp, signature.Timestamp(at)) }, wantErr: signature.ErrBadTimestamp},
		{name: "too old", v: signature.Verifier{Secrets: []string{"s3cret"}, Now: func() time.Time { return at.Add(signature.ToleranceDefault + time.Second) }}, wantErr: signature.ErrStale},
		{name: "from the future", v: signature.Verifier{Secrets: []string{"s3cret"}, Now: func() time.Time { return at.Add(-signature.ToleranceDefault - time.Second) }}, wantErr: signature.ErrStale},
		{name: "at the tolerance", v: signature.Verifier{Secrets: []string{"s3cret"}, Now: func() time.Time { return at.Add(signature.ToleranceDefault) }}},
		{name: "a tolerance of its own", v: signature.Verifier{Secrets: []string{"s3cret"}, Tolerance: time.Second, Now: func() time.Time { return at.Add(2 * time.Second) }}, wantErr: signature.ErrStale},
		{name: "entry without =", v: verifier("s3cret"), edit: func(h http.Header) { h.Set(signature.HeaderSignature, "v2") }, wantErr: signature.ErrMalformed},
		{name: "entry without a scheme", v: verifier("s3cret"), edit: func(h http.Header) { h.Set(signature.HeaderSignature, "=abcd") }, wantErr: signature.ErrMalformed},
		{name: "v2 not hex", v: verifier("s3cret"), edit: func(h http.Header) { h.Set(signature.HeaderSignature, "v2="+strings.Repeat("zz", 32)) }, wantErr: signature.ErrMalformed},
		{name: "v2 too short", v: verifier("s3cret"), edit: func(h http.Header) { h.Set(signature.HeaderSignature, "v2=abcd") }, wantErr: signature.ErrMalformed},
		{name: "a malformed entry beside a good one", v: verifier("s3cret"), edit: func(h http.Header) { h.Add(signature.HeaderSignature, "v2=x") }, wantErr: signature.ErrMalformed},
		{name: "no secrets", v: verifier(), wantErr: signature.ErrInvalidConfig},
		{name: "an empty secret", v: verifier("s3cret", ""), wantErr: signature.ErrInvalidConfig},
		{name: "negative tolerance", v: signature.Verifier{Secrets: []string{"s3cret"}, Tolerance: -time.Second}, wantErr: signature.ErrInvalidConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := signed([]string{"s3cret"}, key, msgID)
			if tt.edit != nil {
				tt.edit(h)
			}
			b := body
			if tt.body != "" {
				b = []byte(tt.body)
			}
			if err := tt.v.Verify(h, b); !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Verify = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// keepOnly drops the signature entries that do not start with prefix.
func keepOnly(prefix string) func(http.Header) {
	return func(h http.Header) {
		var kept []string
		for e := range strings.SplitSeq(h.Get(signature.HeaderSignature), ", ") {
			if strings.HasPrefix(e, prefix) {
				kept = append(kept, e)
			}
		}
		h.Set(signature.HeaderSignature, strings.Join(kept, ", "))
	}
}

// Verify, the function, checks against the clock, with 0 as the default
// tolerance.
func TestVerifyNow(t *testing.T) {
	t.Parallel()
	ts := signature.Timestamp(time.Now())
	h := http.Header{}
	h.Set(signature.HeaderTimestamp, ts)
	h.Set(signature.HeaderIdempotencyKey, "k")
	h.Set(signature.HeaderSignature, signature.Sign([]string{"s3cret"}, ts, "k", "", body))
	if err := signature.Verify([]string{"s3cret"}, h, body, 0); err != nil {
		t.Fatalf("Verify now: %v", err)
	}
	old := signature.Timestamp(time.Now().Add(-time.Hour))
	h.Set(signature.HeaderTimestamp, old)
	h.Set(signature.HeaderSignature, signature.Sign([]string{"s3cret"}, old, "k", "", body))
	if err := signature.Verify([]string{"s3cret"}, h, body, 0); !errors.Is(err, signature.ErrStale) {
		t.Fatalf("Verify an hour old: %v, want ErrStale", err)
	}
}
