package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/admin/admintest"
	"github.com/jetledger/jetledger/console"
	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// site is a run's ledger with what needs a person: two rows in review,
// two failed, one sent (at a real destination), a dead letter and a
// conflict, served by its admin API at addr.
type site struct {
	st                     *ledger.Store
	addr                   admin.Address
	dest                   *webhooktest.Destination
	review, failed, sentID []string
}

const usersFile = `# name role secret
ada operator ada-secret
vic viewer sha256:` + vicSum + `
`

// vicSum is the SHA-256 of "vic-secret".
const vicSum = "fcde5c6de7bc408422c5d656ed97e3ce002729d6b471bd734982399f03693d3c"

// newSite fills a ledger and serves its admin API at addr over nc.
func newSite(t *testing.T, nc *nats.Conn, js jetstream.JetStream, addr admin.Address) *site {
	t.Helper()
	ctx := context.Background()
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s := &site{st: st, addr: addr, dest: webhooktest.NewDestination(t, false)}
	sink, err := webhook.New(webhook.Config{URL: s.dest.URL(), DeleteURL: s.dest.DeleteURL()})
	if err != nil {
		t.Fatal(err)
	}
	ids := admintest.Enqueue(t, st, `{"card":"4111 1111 1111 1111"}`, "r2", "f1", "f2", "sent")
	must := func(_ ledger.OutboxItem, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		must(st.Transition(ctx, id, ledger.Claim, ledger.Params{Worker: "w", Lease: time.Minute}))
	}
	for _, id := range ids[:2] {
		must(st.Transition(ctx, id, ledger.Review, ledger.Params{Worker: "w", Reason: "timed out"}))
	}
	for _, id := range ids[2:4] {
		must(st.Transition(ctx, id, ledger.Fail, ledger.Params{Worker: "w", Reason: "410 gone"}))
	}
	it, err := st.Get(ctx, ids[4])
	if err != nil {
		t.Fatal(err)
	}
	ext, err := sink.Send(ctx, it)
	if err != nil {
		t.Fatal(err)
	}
	must(st.Transition(ctx, ids[4], ledger.Sent, ledger.Params{Worker: "w", ExternalID: ext}))
	s.review, s.failed, s.sentID = ids[:2], ids[2:4], ids[4:]
	if err := st.RecordDeadLetters(ctx, []ledger.DeadLetter{{MessageID: "dl-1", Stream: "S", Sequence: 90, Subject: "ev.bad", Reason: "handler: bad amount", Deliveries: 5}}); err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context, *ledger.Tx, ledger.Delivery) error { return nil }
	for i, data := range []string{"one", "two"} {
		d := ledger.Delivery{MessageID: "same", Stream: "S", Sequence: uint64(100 + i), Subject: "ev", Data: []byte(data)}
		if _, err := st.ApplyBatch(ctx, []ledger.Delivery{d}, noop, ledger.Budget{}); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := admin.Serve(admin.Config{Conn: nc, Store: st, JetStream: js, Address: addr, Canceller: admintest.SinkCanceller{Store: st, Sink: sink}, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	return s
}

// newConsole serves a console over nc with the test's users, read once.
func newConsole(t *testing.T, nc *nats.Conn, prefix string) (*console.Handler, *httptest.Server) {
	t.Helper()
	users, err := console.ParseUsers(strings.NewReader(usersFile))
	if err != nil {
		t.Fatal(err)
	}
	h, err := console.NewHandler(&console.Options{Conn: nc, Users: users, Prefix: prefix, Refresh: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	h.Refresh(context.Background())
	mux := http.NewServeMux()
	mux.Handle(console.NormalizePrefix(prefix)+"/", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return h, srv
}

// client is a browser's session with the console.
type client struct {
	t    *testing.T
	http *http.Client
	base string
}

func newClient(t *testing.T, base string) *client {
	jar, _ := cookiejar.New(nil)
	return &client{t: t, http: &http.Client{Jar: jar, Timeout: time.Minute}, base: base}
}

// signIn signs in as name with secret; it fails the test unless it works.
func (c *client) signIn(name, secret string) {
	c.t.Helper()
	code, body := c.post("/signin", url.Values{"name": {name}, "secret": {secret}})
	if code != http.StatusOK || !strings.Contains(body, `id="who">`+name) {
		c.t.Fatalf("sign in as %s: %d\n%s", name, code, body)
	}
}

func (c *client) get(path string) (int, string) {
	c.t.Helper()
	resp, err := c.http.Get(c.base + path)
	if err != nil {
		c.t.Fatal(err)
	}
	return read(c.t, resp)
}

func (c *client) post(path string, form url.Values) (int, string) {
	c.t.Helper()
	resp, err := c.http.PostForm(c.base+path, form)
	if err != nil {
		c.t.Fatal(err)
	}
	return read(c.t, resp)
}

func read(t *testing.T, resp *http.Response) (int, string) {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

var (
	tokenRe  = regexp.MustCompile(`name="token" value="([^"]+)"`)
	hiddenRe = regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`)
	formRe   = regexp.MustCompile(`(?s)<form method="post" action="[^"]*/(confirm|act)"[^>]*>(.*?)</form>`)
)

// forms are the action forms of a page: each one's hidden fields.
func forms(body string) []url.Values {
	var out []url.Values
	for _, m := range formRe.FindAllStringSubmatch(body, -1) {
		v := url.Values{}
		for _, h := range hiddenRe.FindAllStringSubmatch(m[2], -1) {
			v.Add(h[1], unescape(h[2]))
		}
		out = append(out, v)
	}
	return out
}

func unescape(s string) string {
	return strings.NewReplacer("&#43;", "+", "&amp;", "&", "&#34;", `"`, "&#39;", "'", "&lt;", "<", "&gt;", ">").Replace(s)
}

// quietSite serves an empty ledger's admin API at addr: a site with
// nothing to do.
func quietSite(t *testing.T, nc *nats.Conn, js jetstream.JetStream, addr admin.Address) *ledger.Store {
	t.Helper()
	st, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv, err := admin.Serve(admin.Config{Conn: nc, Store: st, JetStream: js, Address: addr, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	return st
}
