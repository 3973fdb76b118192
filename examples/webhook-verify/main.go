// Command webhook-verify is the least a receiver of jetledger's webhooks
// does: it refuses any request whose signature does not verify. It links
// the standard library and package signature only.
//
//	HOOK_SECRET=s3cret go run ./examples/webhook-verify
package main

import (
	"io"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/jetledger/jetledger/consumer/outbox/webhook/signature"
)

func main() {
	if os.Getenv("HOOK_SECRET") == "" {
		log.Fatal("HOOK_SECRET is required: unsigned webhooks cannot be trusted")
	}
	srv := &http.Server{Addr: "127.0.0.1:8080", Handler: handler([]string{os.Getenv("HOOK_SECRET")}), ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}

// snippet:verify-minimal
func handler(secrets []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		if err := signature.Verify(secrets, r.Header, body, 5*time.Minute); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized) // a 4xx: the outbox fails the row
			return
		}
		// The key is signed too: apply the item once per key, here.
		log.Printf("verified item %s", r.Header.Get(signature.HeaderIdempotencyKey))
		w.WriteHeader(http.StatusNoContent) // {"id": …} instead lets a cancel delete it
	})
}

// end snippet
