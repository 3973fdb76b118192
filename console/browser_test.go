package console_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/console"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/fleet"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/node"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"log/slog"
	"net/http"
	"net/http/httptest"
)

// chromium is the browser's path, or the test is skipped saying why.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("JETLEDGER_CHROMIUM"), "chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium on this host (apt-get install chromium, or set JETLEDGER_CHROMIUM): the console's browser test is skipped")
	return ""
}

// leafSite starts an edge's server, a leaf of the hub in its own domain,
// and connects to it.
func leafSite(t *testing.T, hub string, domain string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	n, err := node.Start(t.Context(), node.Config{Listen: "127.0.0.1:0", StoreDir: filepath.Join(t.TempDir(), "s"),
		Leaf: &node.LeafConfig{URLs: []string{hub}, Domain: domain}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	nc, err := nats.Connect(n.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	return nc, js
}

// report puts a site's record in the hub's fleet bucket, as its run does.
func report(t testing.TB, kv jetstream.KeyValue, r fleet.Record) {
	t.Helper()
	b, _ := json.Marshal(r)
	if _, err := kv.Put(context.Background(), r.Site, b); err != nil {
		t.Fatal(err)
	}
}

// browser is a headless Chromium tab, and where its screenshots go.
type browser struct {
	t   *testing.T
	ctx context.Context
	dir string
}

func newBrowser(t *testing.T) *browser {
	path := chromium(t)
	actx, cancel := chromedp.NewExecAllocator(t.Context(), append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.WindowSize(1280, 900))...)
	t.Cleanup(cancel)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil { // no timeout: it would stop the browser
		t.Fatalf("start Chromium: %v", err)
	}
	dir := os.Getenv("JETLEDGER_SCREENSHOTS")
	if dir == "" {
		dir = t.ArtifactDir()
	}
	return &browser{t: t, ctx: ctx, dir: dir}
}

// do runs steps, each test step bounded generously for a loaded host.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.shot("failed-" + strings.ReplaceAll(what, " ", "-"))
		b.t.Fatalf("%s: %v", what, err)
	}
}

// click clicks sel and waits for the page it loads.
func (b *browser) click(sel string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.CSS(sel)))); err != nil {
		b.shot("failed-click")
		b.t.Fatalf("click %s: %v", sel, err)
	}
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

func eval[T any](b *browser, js string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("%s: %v", js, err)
	}
	return v
}

// shot saves the page as name.png.
func (b *browser) shot(name string) {
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	img, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err == nil {
		err = os.WriteFile(filepath.Join(b.dir, name+".png"), img, 0o644)
	}
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
	}
}

func (b *browser) signIn(base, name, secret string) {
	b.t.Helper()
	b.do("open the sign-in page", chromedp.Navigate(base+"/signin"), chromedp.SetValue(chromedp.ID("name"), name), chromedp.SetValue(chromedp.ID("secret"), secret))
	b.click("#signin")
	if got := b.text("#role"); got != map[string]string{"ada": "operator", "vic": "viewer"}[name] {
		b.t.Fatalf("signed in as %s: role %q", name, got)
	}
}

// The console in a real browser, at a hub with two edge sites, one with
// review rows, failed rows, a dead letter and a conflict. A viewer is
// offered no action and a POST it forges is refused; an operator resolves
// a row as sent, cancels a sent one (the destination sees the DELETE),
// retries by filter, and an action on a row changed behind the page is
// reported, not taken; a row that comes while the queue is open shows
// without a reload. The ledgers and their audit show it. Screenshots
// of each page go to the test's artifacts (go test -artifacts) or
// $JETLEDGER_SCREENSHOTS.
func TestTheConsoleInABrowser(t *testing.T) {
	b := newBrowser(t)
	hub, hjs, u := consumertest.RunHub(t)
	hubNC, _ := consumertest.Connect(t, hub)
	kv, err := hjs.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: fleet.Bucket})
	if err != nil {
		t.Fatal(err)
	}
	ncA, jsA := leafSite(t, u.String(), "siteA")
	ncB, jsB := leafSite(t, u.String(), "siteB")
	a := newSite(t, ncA, jsA, admin.Address{Site: "siteA", Stream: "PAY", Durable: "pay"})
	quietSite(t, ncB, jsB, admin.Address{Site: "siteB", Stream: "PAY", Durable: "pay"})
	now := time.Now()
	report(t, kv, fleet.Record{Site: "siteA", Version: "test", Started: now, At: now, Stream: "PAY", Review: 2, DeadLetters: 1, Conflicts: 1, LedgerFree: -1, StoreFree: -1})
	report(t, kv, fleet.Record{Site: "siteB", Version: "test", Started: now, At: now, Stream: "PAY", LedgerFree: -1, StoreFree: -1})
	consumertest.Eventually(t, time.Minute, "both sites' APIs answering at the hub", func() bool {
		found, _ := admin.Discover(t.Context(), hubNC, 2*time.Second)
		return len(found) == 2
	})
	users, _ := console.ParseUsers(strings.NewReader(usersFile))
	h, err := console.NewHandler(&console.Options{Conn: hubNC, Users: users, Prefix: "/console", Refresh: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h.Start(t.Context())
	mux := http.NewServeMux()
	mux.Handle("/console/", h)
	web := httptest.NewServer(mux)
	t.Cleanup(web.Close)
	base := web.URL + "/console"

	viewerSees(t, b, base)
	operatorSettles(t, b, base, a)
}

func viewerSees(t *testing.T, b *browser, base string) {
	b.signIn(base, "vic", "vic-secret")
	b.do("the sites page", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`tr[data-site="siteA"]`)), chromedp.WaitVisible(chromedp.CSS(`tr[data-site="siteB"]`)))
	if first := eval[string](b, `document.querySelector("#sites tbody tr").dataset.site`); first != "siteA" {
		t.Fatalf("the sites, worst first: %s first, want siteA (it needs a person)", first)
	}
	b.shot("sites")
	b.do("the queue", chromedp.Navigate(base+"/attention"), chromedp.WaitVisible(chromedp.CSS(".kind-conflict")))
	b.shot("attention-viewer")
	if n := eval[int](b, `document.querySelectorAll('form[action$="/confirm"], form[action$="/act"]').length`); n != 0 {
		t.Fatalf("a viewer is offered %d action forms", n)
	}
	status := eval[int](b, `fetch("`+base+`/act", {method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"},
		body: "token=" + document.querySelector('input[name=token]').value + "&site=siteA&stream=PAY&durable=pay&action=outbox.retry&id=x&seen=2099-01-01T00:00:00Z"}).then(r => r.status)`)
	if status != http.StatusForbidden {
		t.Fatalf("a viewer's forged POST: %d, want 403", status)
	}
	b.click(`button.link`) // sign out
}

func operatorSettles(t *testing.T, b *browser, base string, a *site) {
	ctx := context.Background()
	b.signIn(base, "ada", "ada-secret")
	row := func(id string) string { return base + "/outbox/siteA/PAY/pay/" + id }

	// Resolve a row in review as sent, with the destination's id.
	b.do("a review row", chromedp.Navigate(row(a.review[0])), chromedp.WaitVisible(chromedp.ID("show-payload")))
	b.shot("row")
	b.click("#show-payload")
	if p := b.text("#payload"); !strings.Contains(p, "4111") {
		t.Fatalf("the payload asked for: %q", p)
	}
	b.do("the destination's id", chromedp.SetValue(chromedp.ID("external-id"), "dest-77"))
	b.click("#act-sent")
	b.shot("confirm")
	b.click("#confirm-go")
	if got := b.text("#done"); !strings.HasPrefix(got, "1 of 1 done") {
		t.Fatalf("resolve as sent: %q", got)
	}
	if it, _ := a.st.Get(ctx, a.review[0]); it.Status != ledger.StatusSent || it.ExternalID != "dest-77" {
		t.Fatalf("the row resolved: %s %q", it.Status, it.ExternalID)
	}

	// Cancel a sent row: the confirmation says it deletes, and it does.
	b.do("the sent row", chromedp.Navigate(row(a.sentID[0])), chromedp.WaitVisible(chromedp.ID("act-cancel")))
	b.click("#act-cancel")
	b.do("the delete warned of", chromedp.WaitVisible(chromedp.ID("will-delete")))
	b.shot("confirm-cancel")
	b.click("#confirm-go")
	if it, _ := a.st.Get(ctx, a.sentID[0]); it.Status != ledger.StatusCancelled || len(a.dest.Items()) != 0 {
		t.Fatalf("the sent row cancelled: %s, %d at the destination", it.Status, len(a.dest.Items()))
	}

	// Retry every failed row by filter, counted first.
	b.do("the failed rows", chromedp.Navigate(base+"/attention?site=siteA&kind=failed"), chromedp.WaitVisible(chromedp.CSS(".bulk-retry")))
	b.shot("attention-operator")
	b.click(".bulk-retry")
	if w := b.text("#will"); !strings.HasPrefix(w, "2 row(s)") {
		t.Fatalf("the bulk retry's count: %q", w)
	}
	b.click("#confirm-go")
	if got := b.text("#done"); !strings.HasPrefix(got, "2 of 2 done") {
		t.Fatalf("the bulk retry: %q", got)
	}
	b.shot("result")

	// A row changed behind the page: reported, not touched.
	b.do("another review row", chromedp.Navigate(row(a.review[1])), chromedp.WaitVisible(chromedp.ID("act-failed")))
	b.click("#act-failed")
	if _, err := a.st.Transition(ctx, a.review[1], ledger.ResolveSent, ledger.Params{ExternalID: "x", Audit: &ledger.Audit{Who: "bob", From: "cli"}}); err != nil {
		t.Fatal(err)
	}
	b.click("#confirm-go")
	if got := b.text("#skipped .changed"); !strings.Contains(got, "Changed since you saw it: not touched") {
		t.Fatalf("a changed row's result: %q", got)
	}
	b.shot("result-changed")

	for _, id := range a.failed {
		if it, _ := a.st.Get(ctx, id); it.Status != ledger.StatusQueued {
			t.Errorf("failed row %s after the retry: %s", id, it.Status)
		}
	}
	audit, _ := a.st.AuditOf(ctx, a.sentID[0])
	if len(audit) == 0 || audit[len(audit)-1].Who != "ada" {
		t.Fatalf("the cancel's audit: %+v", audit)
	}
	b.do("the site", chromedp.Navigate(base+"/site/siteA"), chromedp.WaitVisible(chromedp.CSS(".part")))
	b.shot("site")
	b.do("the graphs", chromedp.Navigate(base+"/graphs"), chromedp.WaitVisible(chromedp.CSS(".graph")))
	b.shot("graphs")
	// A row that comes while the page is open shows without a reload.
	b.do("the queue, marked", chromedp.Navigate(base+"/attention"), chromedp.WaitVisible(chromedp.ID("queue")))
	eval[bool](b, `window.notReloaded = true`)
	if err := a.st.RecordDeadLetters(ctx, []ledger.DeadLetter{{MessageID: "dl-late", Stream: "S", Sequence: 91, Subject: "ev.late", Reason: "late", Deliveries: 5}}); err != nil {
		t.Fatal(err)
	}
	b.do("the new dead letter shown live", chromedp.WaitVisible(chromedp.CSS(`tr.kind-dead_letter[data-id="2"]`)))
	if !eval[bool](b, `window.notReloaded === true`) {
		t.Fatal("the page was reloaded to show the new row")
	}
	b.do("a phone", chromedp.EmulateViewport(390, 844), chromedp.Navigate(base+"/attention"), chromedp.WaitVisible(chromedp.ID("queue")))
	if wide := eval[bool](b, `document.documentElement.scrollWidth > window.innerWidth + 1`); wide {
		t.Errorf("on a phone's screen the queue is wider than the screen")
	}
	b.shot("phone")
}
