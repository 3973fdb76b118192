// Command webhook-receiver receives jetledger's webhooks: it verifies each
// request's signature and applies each item once, however often the outbox
// sends it, by its Idempotency-Key.
//
//	go run ./examples/webhook-receiver -listen 127.0.0.1:8080 -secret s3cret
package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
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

	"github.com/jetledger/jetledger/consumer/outbox/webhook"
)

// Config is what run needs; main fills it from flags.
type Config struct {
	Listen    string        // address to serve, host:port
	Secret    string        // the sink's webhook.Config.Secret
	Tolerance time.Duration // how old a signed timestamp may be; 0: 5 minutes
	Logger    *slog.Logger
	// Listener, if set, is served instead of listening on Listen (tests).
	Listener net.Listener
	// Received, if set, is called with each newly applied item.
	Received func(key string, body []byte)
}

func main() {
	var cfg Config
	flag.StringVar(&cfg.Listen, "listen", "127.0.0.1:8080", "address to serve")
	flag.StringVar(&cfg.Secret, "secret", os.Getenv("HOOK_SECRET"), "webhook signing secret")
	flag.Parse()
	cfg.Logger = slog.Default()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "webhook-receiver:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg Config) error {
	if cfg.Secret == "" {
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

// snippet:receiver-verify
// verify checks a request as webhook.Sink signs it: Jetledger-Timestamp is
// the Unix time in seconds, Jetledger-Signature is "v1=" followed by the hex
// HMAC-SHA256, keyed with the secret, of the timestamp, ".", and the body.
// A timestamp older than tolerance is refused, so a captured request cannot
// be replayed later.
func verify(secret string, h http.Header, body []byte, tolerance time.Duration, now time.Time) error {
	ts := h.Get(webhook.HeaderTimestamp)
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("bad %s %q", webhook.HeaderTimestamp, ts)
	}
	if age := now.Sub(time.Unix(sec, 0)); age > tolerance || age < -tolerance {
		return fmt.Errorf("timestamp %s off by %s", ts, age)
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "."))
	m.Write(body)
	want := "v1=" + hex.EncodeToString(m.Sum(nil))
	if !hmac.Equal([]byte(h.Get(webhook.HeaderSignature)), []byte(want)) {
		return errors.New("bad signature")
	}
	return nil
}

// end snippet

// receiver applies each Idempotency-Key once. A real one keeps the keys in
// its database, in the transaction that applies the item.
type receiver struct {
	cfg  Config
	mu   sync.Mutex
	seen map[string]string // Idempotency-Key → our id for the item
}

func newReceiver(cfg Config) *receiver { return &receiver{cfg: cfg, seen: map[string]string{}} }

// snippet:receiver-dedupe
func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return
	}
	if err := verify(rc.cfg.Secret, r.Header, body, rc.cfg.Tolerance, time.Now()); err != nil {
		rc.cfg.Logger.Warn("webhook refused", "err", err)
		http.Error(w, err.Error(), http.StatusUnauthorized) // a 4xx: the outbox fails the row, no retry
		return
	}
	key := r.Header.Get(webhook.HeaderIdempotencyKey) // the outbox row's id: the same on every resend
	if key == "" {
		http.Error(w, "no "+webhook.HeaderIdempotencyKey, http.StatusBadRequest)
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
