package service

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/webhook"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
	"github.com/jetledger/jetledger/natsconn"
	"github.com/jetledger/jetledger/node"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

const deployDir = "../deploy"

// serve runs cfg with its metrics served until the test ends, and
// returns their URL.
func serve(t *testing.T, cfg Config) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Metrics = l
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	t.Cleanup(func() { stop(); <-done })
	return "http://" + l.Addr().String() + "/metrics"
}

// scrape reads url until it shows every one of want, and returns the text.
func scrape(t *testing.T, url string, want ...string) string {
	t.Helper()
	var text string
	consumertest.Eventually(t, 2*time.Minute, url+" to show "+strings.Join(want, ", "), func() bool {
		resp, err := http.Get(url) //nolint:noctx // a test's probe
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		text = string(b)
		for _, w := range want {
			if !strings.Contains(text, "\n"+w) {
				return false
			}
		}
		return true
	})
	return text
}

// exported are the metric names of exposition texts.
func exported(texts ...string) map[string]bool {
	out := map[string]bool{}
	for _, text := range texts {
		for _, line := range strings.Split(text, "\n") {
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			name, _, _ := strings.Cut(line, " ")
			name, _, _ = strings.Cut(name, "{")
			out[name] = true
		}
	}
	return out
}

// queries are the PromQL expressions of the dashboard's panels and the
// alert rules.
func queries(t *testing.T) []string {
	t.Helper()
	var dash struct {
		Panels []struct {
			Targets []struct{ Expr string } `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct{ Query string } `json:"list"`
		} `json:"templating"`
	}
	b, err := os.ReadFile(filepath.Join(deployDir, "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	var out []string
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		out = append(out, v.Query)
	}
	rules, err := os.ReadFile(filepath.Join(deployDir, "prometheus-rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^\s*expr: (.*)$`).FindAllStringSubmatch(string(rules), -1) {
		out = append(out, m[1])
	}
	if len(out) < 12 {
		t.Fatalf("only %d queries read from deploy/: the files' shape changed", len(out))
	}
	return out
}

// The dashboard and the alert rules in deploy/ name only metrics the runs
// really export: an owned partition's run with a webhook, and an edge's
// run, scraped here; their exposition passes promlint; and promtool
// checks the rules and runs their unit tests, where it is installed
// (Debian's prometheus package; .ci/run installs it).
func TestTheDashboardAndAlertRulesNameExportedMetrics(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	_, js := consumertest.Connect(t, srv)
	dest := webhooktest.NewDestination(t, true)
	owned := testConfig(t, t.TempDir())
	owned.NATS, owned.Owner = &natsconn.Config{URL: srv.ClientURL()}, &Owner{Name: "a", Standby: true}
	owned.Webhook = &webhook.Config{URL: dest.URL()}
	url := serve(t, owned)
	publish(t, js, 0, 3)
	ownerText := scrape(t, url, "jetledger_changelog_owner 1", "jetledger_batch_commit_seconds_bucket", "jetledger_outbox_sends_total")

	_, hjs, u := consumertest.RunHub(t)
	consumertest.CreateStream(t, hjs, jetstream.StreamConfig{Name: "H", Subjects: []string{"orders.>"}})
	edge := testConfig(t, t.TempDir())
	edge.Stream.Subjects = nil
	edge.Node = node.Config{Listen: "127.0.0.1:0", StoreDir: filepath.Join(t.TempDir(), "s"), Leaf: &node.LeafConfig{URLs: []string{u.String()}, Domain: "site1"}}
	edge.Hub = &Hub{Stream: "H", Domain: "hub"}
	edgeText := scrape(t, serve(t, edge), "jetledger_hub_link_up 1")

	groupText := scrape(t, serveGroupMember(t, srv.ClientURL()), "jetledger_group_members 1", "jetledger_group_partitions_without_owner 0")

	names := exported(ownerText, edgeText, groupText)
	token := regexp.MustCompile(`\bjetledger_[a-z_]+\b`)
	for _, q := range queries(t) {
		for _, name := range token.FindAllString(q, -1) {
			base := name
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				base = strings.TrimSuffix(base, suffix)
			}
			if !names[name] && !names[base+"_bucket"] {
				t.Errorf("deploy/ queries %s, which no run exports: %s", name, q)
			}
		}
	}
	for _, text := range []string{ownerText, edgeText, groupText} {
		problems, err := promlint.New(strings.NewReader(text)).Lint()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("promlint: %s: %s", p.Metric, p.Text)
		}
	}
	promtool(t)
}

// serveGroupMember runs a group of one member of a stream in two
// partitions, on the server at url, with its metrics served until the
// test ends, and returns their URL.
func serveGroupMember(t *testing.T, url string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, t.TempDir())
	cfg.NATS, cfg.Metrics = &natsconn.Config{URL: url}, l
	cfg.Stream.Name, cfg.Stream.Subjects = "G", []string{"g.*"}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- RunPartitions(ctx, cfg, Partitions{Count: 2, Key: 1, Group: &Group{Name: "g", StableAfter: 5 * time.Second}})
	}()
	t.Cleanup(func() { stop(); <-done })
	return "http://" + l.Addr().String() + "/metrics"
}

// promtool checks the rules and runs their tests, or says it cannot.
func promtool(t *testing.T) {
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("promtool is not installed (apt-get install prometheus): the rules' own checks are skipped")
		return
	}
	for _, args := range [][]string{{"check", "rules", "prometheus-rules.yml"}, {"test", "rules", "prometheus-rules.test.yml"}} {
		cmd := exec.CommandContext(t.Context(), path, args...)
		cmd.Dir = deployDir
		if out, err := cmd.CombinedOutput(); err != nil || !slices.ContainsFunc(strings.Split(string(out), "\n"), func(l string) bool { return strings.Contains(l, "SUCCESS") }) {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
