package node

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// One embedded server per store: a second is refused with the owner named,
// before it starts a server; the lock goes with Close, and a lock file left
// behind by a dead owner refuses nobody.
func TestEmbeddedStoreLock(t *testing.T) {
	t.Parallel()
	if !LockSupported {
		t.Skip("no flock on this OS")
	}
	dir := filepath.Join(t.TempDir(), "nats")
	start := func() (*Node, error) {
		return Start(t.Context(), Config{Listen: "127.0.0.1:0", StoreDir: dir, Logger: quiet})
	}
	first, err := start()
	if err != nil {
		t.Fatal(err)
	}
	second, err := start()
	var inUse *StoreInUseError
	if !errors.As(err, &inUse) || !errors.Is(err, ErrStoreLocked) {
		if second != nil {
			second.Close()
		}
		t.Fatalf("second server on one store: err %v, want *StoreInUseError (ErrStoreLocked)", err)
	}
	if inUse.PID != os.Getpid() || inUse.URL != first.ClientURL() || inUse.Dir != dir {
		t.Fatalf("refusal names pid %d, url %q, dir %q; want %d, %q, %q", inUse.PID, inUse.URL, inUse.Dir, os.Getpid(), first.ClientURL(), dir)
	}
	first.Close()

	again, err := start()
	if err != nil {
		t.Fatalf("after Close: %v", err)
	}
	again.Close()

	// What a SIGKILLed owner leaves: the file with its pid, no lock.
	if err := os.WriteFile(filepath.Join(dir, LockFile), []byte("999999\nnats://127.0.0.1:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stale, err := start()
	if err != nil {
		t.Fatalf("stale lock file refused the start: %v", err)
	}
	stale.Close()
}

func TestParseByteSize(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]ByteSize{
		"96MiB": 96 << 20, "96mib": 96 << 20, "96M": 96 << 20, "100MB": 100_000_000, "1GiB": 1 << 30,
		"65536": 65536, "64 KiB": 64 << 10, "0": 0, "2gb": 2_000_000_000, "12b": 12,
	} {
		if got, err := ParseByteSize(in); err != nil || got != want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "-1MiB", "1.5GiB", "12QB", "9999999999GiB"} {
		if got, err := ParseByteSize(in); err == nil {
			t.Errorf("ParseByteSize(%q) = %d, want an error", in, got)
		}
	}
}
