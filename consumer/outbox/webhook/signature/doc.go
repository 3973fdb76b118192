// Package signature signs and verifies jetledger's webhook requests. It
// imports only the standard library, so a receiver that verifies with it
// links neither SQLite nor NATS.
//
// The webhook sink sends, with every item, Jetledger-Timestamp (Unix
// seconds) and Jetledger-Signature, a comma-separated list of entries:
//
//	Jetledger-Signature: v2=<hex>, v2=<hex>, v1=<hex>, v1=<hex>
//
// A v2 entry is the hex HMAC-SHA256, keyed with one secret, of
//
//	"v2\n" + timestamp + "\n" + Idempotency-Key + "\n" + Jetledger-Message-Id + "\n" + body
//
// so a captured request cannot be replayed under another Idempotency-Key
// or message id: the key a receiver dedupes by is signed. A v1 entry
// signs only timestamp + "." + body; it is deprecated, sent beside v2
// while receivers move to it, and refused by Verify unless
// Verifier.AllowV1. During a secret rotation the sink signs with two
// secrets, one entry of each version per secret, and a receiver holding
// either secret accepts the request.
//
// A receiver verifies the raw body before acting on it:
//
//	body, err := io.ReadAll(r.Body)
//	...
//	if err := signature.Verify([]string{secret}, r.Header, body, 5*time.Minute); err != nil {
//		http.Error(w, "bad signature", http.StatusUnauthorized)
//		return
//	}
//	key := r.Header.Get(signature.HeaderIdempotencyKey) // signed: apply each key once
package signature
