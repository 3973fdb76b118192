package node

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jetledger/jetledger/natsconn"
)

// run's own connection is natsconn.Connect(n.Conn()), not
// n.JetStream(): its URL is the listener's tls://..., which makes nats.go
// do TLS over the in-process pipe unless Conn says nats://; run then
// failed (x509) or hung.
func TestOwnConnectionUnderTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pki := writePKI(t, dir)
	for i, clientCA := range []string{"", pki.ca} {
		n, err := Start(t.Context(), Config{Listen: "127.0.0.1:0", StoreDir: filepath.Join(dir, "nats", strconv.Itoa(i)), Logger: quiet,
			Token: "admin", TLS: TLSConfig{Cert: pki.serverCert, Key: pki.serverKey, ClientCA: clientCA}})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			nc, _, err := natsconn.Connect(ctx, n.Conn())
			if err == nil {
				nc.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("client CA %q: run's own connection (n.Conn()): %v", clientCA, err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("client CA %q: run's own connection (n.Conn()) hangs", clientCA)
		}
		n.Close()
	}
}
