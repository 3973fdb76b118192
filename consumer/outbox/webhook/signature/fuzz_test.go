package signature_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/jetledger/jetledger/consumer/outbox/webhook/signature"
)

// FuzzVerify feeds arbitrary signature headers and fields: Verify never
// panics, refuses with one of its errors, and never accepts a header it
// did not sign. A request Sign signed, with fields a header can carry, is
// accepted.
func FuzzVerify(f *testing.F) {
	f.Add("v2=00", "1700000000", "01KEY", "msg-1", []byte(`{}`))
	f.Add("v2=, v1=,,", "1700000000", "", "", []byte(nil))
	f.Add("=,=,v2==", "-1", "k", "m", []byte("\xff"))
	f.Add("v1="+strings.Repeat("ab", 32), "00000000000000000001", "k", "m", []byte("x"))
	f.Add(" v2 = ab , v3=zz", "99999999999999999999", "k\n", "m\r", []byte("x"))
	f.Fuzz(func(t *testing.T, sig, ts, key, msgID string, body []byte) {
		v := verifier("s3cret")
		h := http.Header{}
		h.Set(signature.HeaderTimestamp, signature.Timestamp(at))
		h.Set(signature.HeaderIdempotencyKey, key)
		h.Set(signature.HeaderMessageID, msgID)
		h.Set(signature.HeaderSignature, sig)
		err := v.Verify(h, body)
		if err == nil {
			t.Fatalf("an unsigned header %q verified", sig)
		}
		if !isRefusal(err) {
			t.Fatalf("Verify refused with %v, not one of the package's errors", err)
		}
		h.Set(signature.HeaderTimestamp, ts)
		if err := v.Verify(h, body); err == nil || !isRefusal(err) {
			t.Fatalf("timestamp %q, header %q: %v", ts, sig, err)
		}

		ts = signature.Timestamp(at)
		h.Set(signature.HeaderTimestamp, ts)
		h.Set(signature.HeaderSignature, signature.Sign([]string{"s3cret"}, ts, key, msgID, body))
		err = v.Verify(h, body)
		if strings.ContainsAny(key+msgID, "\r\n") {
			if !errors.Is(err, signature.ErrMalformed) {
				t.Fatalf("a line break in a signed field: %v, want ErrMalformed", err)
			}
		} else if err != nil {
			t.Fatalf("Sign(%q, %q) did not verify: %v", key, msgID, err)
		}
	})
}

func isRefusal(err error) bool {
	for _, want := range []error{signature.ErrNoSignature, signature.ErrMalformed, signature.ErrBadTimestamp,
		signature.ErrStale, signature.ErrOnlyV1, signature.ErrBadSignature} {
		if errors.Is(err, want) {
			return true
		}
	}
	return false
}
