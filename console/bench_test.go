package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/console"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/fleet"
	"github.com/nats-io/nats.go/jetstream"
)

// fleetOf puts n sites' records in a hub's bucket, a tenth of them with
// rows in review, and returns a console over it, read once.
func fleetOf(b *testing.B, n int) *console.Handler {
	b.Helper()
	hub, hjs, _ := consumertest.RunHub(b)
	nc, _ := consumertest.Connect(b, hub)
	kv, err := hjs.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: fleet.Bucket})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	for i := range n {
		r := fleet.Record{Site: fmt.Sprintf("site%03d", i), Version: "v1", Started: now, At: now, Stream: "PAY", AppliedSeq: uint64(i * 100), LedgerFree: 1 << 30, StoreFree: 1 << 30}
		if i%10 == 0 {
			r.Review = 3
		}
		report(b, kv, r)
	}
	h, err := console.NewHandler(&console.Options{Conn: nc, Refresh: time.Hour}) // no sign-in: loopback
	if err != nil {
		b.Fatal(err)
	}
	return h
}

// The sites page of a fleet of 200 sites (records at the hub): the read
// of the hub's records (Refresh, in the background every Refresh) and the
// page's render, each timed per operation. docs/operations.md has the
// figures.
func BenchmarkSitesPage200(b *testing.B) {
	h := fleetOf(b, 200)
	b.Run("read", func(b *testing.B) {
		for b.Loop() {
			h.Refresh(context.Background())
		}
	})
	h.Refresh(context.Background())
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	b.Run("render", func(b *testing.B) {
		for b.Loop() {
			resp, err := c.Get(srv.URL + "/")
			if err != nil {
				b.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.Body.Close(); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "site199") {
				b.Fatalf("the sites page: %d", resp.StatusCode)
			}
		}
	})
}
