package node

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// A Config the node cannot use is refused with a typed error before
// anything is touched: the store directory is not even created.
func TestStartValidatesBeforeIO(t *testing.T) {
	t.Parallel()
	leaf := func(mod func(*LeafConfig)) *LeafConfig {
		l := &LeafConfig{URLs: []string{"nats-leaf://127.0.0.1:7422"}, Domain: "site1"}
		mod(l)
		return l
	}
	tests := []struct {
		name    string
		cfg     Config
		wantErr error
	}{
		{name: "no store", cfg: Config{StoreDir: ""}, wantErr: ErrInvalidConfig},
		{name: "listen without port", cfg: Config{Listen: "127.0.0.1"}, wantErr: ErrInvalidConfig},
		{name: "listen port too big", cfg: Config{Listen: "127.0.0.1:70000"}, wantErr: ErrInvalidConfig},
		{name: "negative sync", cfg: Config{SyncInterval: -time.Second}, wantErr: ErrInvalidConfig},
		{name: "memory limit too low", cfg: Config{MemoryLimit: MemoryLimitMin - 1}, wantErr: ErrMemoryLimit},
		{name: "leaf without domain", cfg: Config{Leaf: leaf(func(l *LeafConfig) { l.Domain = "" })}, wantErr: ErrDomain},
		{name: "leaf bad domain", cfg: Config{Leaf: leaf(func(l *LeafConfig) { l.Domain = "a.b" })}, wantErr: ErrDomain},
		{name: "leaf bad hub domain", cfg: Config{Leaf: leaf(func(l *LeafConfig) { l.HubDomain = "h b" })}, wantErr: ErrHubDomainName},
		{name: "leaf domain is the hub's", cfg: Config{Leaf: leaf(func(l *LeafConfig) { l.Domain = DefaultHubDomain })}, wantErr: ErrSameDomain},
		{name: "leaf cert without key", cfg: Config{Leaf: leaf(func(l *LeafConfig) { l.TLSCert = "c.pem" })}, wantErr: ErrTLSPair},
		{name: "leaf CA missing", cfg: Config{Leaf: leaf(func(l *LeafConfig) { l.TLSCA = "/nonexistent/ca.pem" })}, wantErr: ErrLeafTLS},
		{name: "leaf without URL", cfg: Config{Leaf: leaf(func(l *LeafConfig) { l.URLs = nil })}, wantErr: ErrHubURL},
		{name: "leaf URL without host", cfg: Config{Leaf: leaf(func(l *LeafConfig) { l.URLs = []string{"nats-leaf://u:s3cret@"} })}, wantErr: ErrHubURL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "store")
			cfg := tt.cfg
			if tt.name != "no store" {
				cfg.StoreDir = dir
			}
			cfg.Logger = quiet
			n, err := Start(t.Context(), cfg)
			if err == nil {
				n.Close()
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Start: %v, want %v", err, tt.wantErr)
			}
			if _, serr := os.Stat(dir); !errors.Is(serr, os.ErrNotExist) {
				t.Fatalf("the refused Start made its store: %v", serr)
			}
		})
	}
}

// A hub URL's password never shows in the refusal, and the refusal names
// which URL it was.
func TestHubURLErrorHidesThePassword(t *testing.T) {
	t.Parallel()
	l := &LeafConfig{URLs: []string{"nats-leaf://hub:7422", "u:s3cretpw@hub.example:7422"}, Domain: "e1"}
	err := l.Validate()
	var bad *HubURLError
	if !errors.As(err, &bad) || bad.Index != 1 {
		t.Fatalf("Validate: %v, want a *HubURLError for URLs[1]", err)
	}
	if strings.Contains(err.Error(), "s3cretpw") {
		t.Fatalf("the error shows the password: %v", err)
	}
}

// A memory limit sets the Go memory limit to it less the reserve; none
// leaves it. Not parallel: the memory limit is the process's.
func TestStartAppliesMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	for _, tt := range []struct {
		limit  ByteSize
		wantGo int64
	}{
		{0, math.MaxInt64},
		{96 << 20, 52 << 20},
	} {
		debug.SetMemoryLimit(math.MaxInt64)
		n, err := Start(t.Context(), Config{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), MemoryLimit: tt.limit, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		n.Close()
		if got := debug.SetMemoryLimit(-1); got != tt.wantGo {
			t.Errorf("MemoryLimit %s: Go memory limit %d, want %d", tt.limit, got, tt.wantGo)
		}
	}
}

// The duplicate window of a stream: given, NATS's default, or short under
// a memory limit.
func TestDuplicateWindow(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		given time.Duration
		limit ByteSize
		want  time.Duration
	}{
		{0, 0, DefaultDuplicateWindow},
		{0, 96 << 20, LimitedDuplicateWindow},
		{45 * time.Second, 96 << 20, 45 * time.Second},
	} {
		if got := DuplicateWindow(tt.given, tt.limit); got != tt.want {
			t.Errorf("DuplicateWindow(%s, %s) = %s, want %s", tt.given, tt.limit, got, tt.want)
		}
	}
}
