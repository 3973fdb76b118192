// Package webhook is the HTTP sink of jetledger's outbox: it POSTs each item
// with its outbox id as the Idempotency-Key, signs the request when a secret
// is set (the timestamp, the key, the message id and the body; two secrets
// while one is rotated; package signature verifies it), and deletes sent
// items through a URL template when they are cancelled.
//
// A failed send is retried only when it provably did not arrive: the
// connection was refused, the name did not resolve, the TLS handshake
// rejected the certificate, or the status is one the destination documents as
// "not processed" (Config.RetryOn, default 429). A 4xx fails. Any other
// answer or failure after the request left, a 500 or a 303 included, is an
// unknown outcome: the row goes to review, or is re-sent with the same key if
// the destination is idempotent.
//
//	sink, err := webhook.New(webhook.Config{
//		URL:       "https://api.example.com/hooks",
//		Secret:    os.Getenv("HOOK_SECRET"),
//		DeleteURL: "https://api.example.com/items/{external_id}", // a route that deletes, answering 2xx
//	})
//	d, err := outbox.New(store, outbox.Config{Sink: sink})
package webhook
