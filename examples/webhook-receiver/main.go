// Command webhook-receiver receives jetledger's webhooks: it verifies each
// request's signature and applies each item once, however often the outbox
// sends it, by its Idempotency-Key.
//
//	go run ./examples/webhook-receiver -listen 127.0.0.1:8080 -secret s3cret
//
// While the sender rotates its secret, give the old one too (-old-secret).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"time"

	"github.com/jetledger/jetledger/consumer/outbox/webhook/signature"
)

// Config is what run needs; main fills it from flags.
type Config struct {
	Listen    string        // address to serve, host:port
	Secrets   []string      // the sink's secrets (webhook.Config.Secret, Secrets): two while it rotates
	Tolerance time.Duration // how far a signed timestamp may be from now, either way; 0: 5 minutes
	Logger    *slog.Logger
	// Listener, if set, is served instead of listening on Listen (tests).
	Listener net.Listener
	// Received, if set, is called with each newly applied item.
	Received func(key string, body []byte)
}

func main() {
	var cfg Config
	flag.StringVar(&cfg.Listen, "listen", "127.0.0.1:8080", "address to serve")
	secret := flag.String("secret", os.Getenv("HOOK_SECRET"), "webhook signing secret")
	old := flag.String("old-secret", os.Getenv("HOOK_SECRET_OLD"), "the secret being rotated out, accepted beside -secret")
	flag.Parse()
	for _, s := range []string{*secret, *old} {
		if s != "" {
			cfg.Secrets = append(cfg.Secrets, s)
		}
	}
	cfg.Logger = slog.Default()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "webhook-receiver:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg Config) error {
	if len(cfg.Secrets) == 0 {
		return errors.New("a secret is required: unsigned webhooks cannot be trusted")
	}
	if cfg.Tolerance == 0 {
		cfg.Tolerance = 5 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return err
		}
	}
	srv := &http.Server{Handler: newReceiver(cfg), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx) //nolint:errcheck // Serve reports the outcome
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// receiver applies each Idempotency-Key once. A real one keeps the keys in
// its database, in the transaction that applies the item.
type receiver struct {
	cfg      Config
	verifier signature.Verifier
	mu       sync.Mutex
	seen     map[string]string // Idempotency-Key → our id for the item
}

func newReceiver(cfg Config) *receiver {
	// snippet:receiver-verify
	// The verifier checks a request as webhook.Sink signs it: v2 is an
	// HMAC-SHA256 of Jetledger-Timestamp, the Idempotency-Key,
	// Jetledger-Message-Id and the body; any of the secrets matching passes.
	// A timestamp further than Tolerance from now, either way, is refused, so
	// a captured request can be replayed neither later nor under another key.
	verifier := signature.Verifier{Secrets: cfg.Secrets, Tolerance: cfg.Tolerance}
	// end snippet
	return &receiver{cfg: cfg, verifier: verifier, seen: map[string]string{}}
}

// snippet:receiver-dedupe
func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return
	}
	if err := rc.verifier.Verify(r.Header, body); err != nil {
		rc.cfg.Logger.Warn("webhook refused", "err", err)
		http.Error(w, err.Error(), http.StatusUnauthorized) // a 4xx: the outbox fails the row, no retry
		return
	}
	key := r.Header.Get(signature.HeaderIdempotencyKey) // the outbox row's id: the same on every resend
	if key == "" {
		http.Error(w, "no "+signature.HeaderIdempotencyKey, http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	id, dup := rc.seen[key]
	if !dup {
		id = "item-" + strconv.Itoa(len(rc.seen)+1)
		rc.seen[key] = id
		if rc.cfg.Received != nil {
			rc.cfg.Received(key, body) // apply the item here, once
		}
	}
	rc.mu.Unlock()
	// The same answer to a resend: the sink records {"id"} as the external id.
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"id": id, "duplicate": dup}) //nolint:errcheck // the client went away
}

// end snippet
