package signature_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/jetledger/jetledger/consumer/outbox/webhook/signature"
)

// A receiver verifies the raw body and the signed headers before it
// applies anything; the Idempotency-Key it then dedupes by is signed.
func ExampleVerify() {
	secrets := []string{"s3cret"} // during a rotation: the old and the new
	handler := func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		if err := signature.Verify(secrets, r.Header, body, 5*time.Minute); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized) // a 4xx: the outbox fails the row
			return
		}
		fmt.Println("apply once:", r.Header.Get(signature.HeaderIdempotencyKey))
	}

	// A request as the webhook sink signs it.
	body := `{"charge":1}`
	ts := signature.Timestamp(time.Now())
	r := httptest.NewRequest(http.MethodPost, "/hooks", strings.NewReader(body))
	r.Header.Set(signature.HeaderTimestamp, ts)
	r.Header.Set(signature.HeaderIdempotencyKey, "01KEY")
	r.Header.Set(signature.HeaderMessageID, "msg-1")
	r.Header.Set(signature.HeaderSignature, signature.Sign(secrets, ts, "01KEY", "msg-1", []byte(body)))
	handler(httptest.NewRecorder(), r)

	// The same request replayed under another key is refused.
	r.Header.Set(signature.HeaderIdempotencyKey, "01REPLAY")
	err := signature.Verify(secrets, r.Header, []byte(body), 5*time.Minute)
	fmt.Println(errors.Is(err, signature.ErrBadSignature))
	// Output:
	// apply once: 01KEY
	// true
}
