package integration

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/webhooktest"
	"github.com/jetledger/jetledger/publisher"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// hubPasswords are the passwords of docs/edge.md's hub configuration, given
// to nats-server through its environment.
var hubPasswords = map[string]string{"site": "site-pw", "hub": "hub-pw", "operator": "operator-pw", "viewer": "viewer-pw"}

// startHubOfTheDocs runs nats-server with the hub configuration of
// docs/edge.md (its one conf block): accounts for the sites, operators
// and viewers, on free ports.
func startHubOfTheDocs(t *testing.T) *hub {
	t.Helper()
	conf := consumertest.ConfBlock(t, "../docs/edge.md")
	// The guide shows the file deploy/ ships.
	if file, err := os.ReadFile("../deploy/nats/hub.conf"); err != nil || strings.TrimSpace(string(file)) != strings.TrimSpace(conf) {
		t.Fatalf("deploy/nats/hub.conf is not docs/edge.md's hub configuration (%v)", err)
	}
	dir := t.TempDir()
	h := &hub{t: t, bin: natsServerBinary(t), conf: filepath.Join(dir, "hub.conf"), port: freePort(t), leafPort: freePort(t)}
	conf = strings.NewReplacer("127.0.0.1:4222", fmt.Sprintf("127.0.0.1:%d", h.port), "127.0.0.1:7422", fmt.Sprintf("127.0.0.1:%d", h.leafPort),
		"/var/lib/nats", filepath.Join(dir, "store")).Replace(conf)
	if err := os.WriteFile(h.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	var env []string
	for user, pw := range hubPasswords {
		env = append(env, strings.ToUpper(user)+"_PASSWORD="+pw)
	}
	h.p = startBinary(t, h.bin, env, "-c", h.conf)
	consumertest.Eventually(t, 30*time.Second, "the hub answering its hub user", func() bool {
		nc, err := nats.Connect(h.url(), nats.UserInfo("hub", hubPasswords["hub"]))
		if err == nil {
			nc.Close()
		}
		return err == nil
	})
	return h
}

// Issue 43, the hub's accounts: docs/edge.md's configuration, two sites
// behind it with 3 effects each in review. From the operators' account,
// discovery finds both sites, status sees each one's attention and the
// command line settles each; a viewer reads and cannot act; the sites'
// leaf user cannot log in as a client.
func TestOperatorsAtAHubWithAccountsReachEverySite(t *testing.T) {
	t.Parallel()
	h := startHubOfTheDocs(t)
	hubURL := func(user string) string {
		return fmt.Sprintf("nats://%s:%s@127.0.0.1:%d", user, hubPasswords[user], h.port)
	}
	hjs := connectTo(t, hubURL("hub"))
	consumertest.CreateStream(t, hjs, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Duplicates: 2 * time.Minute})
	pub, err := publisher.New(hjs, publisher.Config{})
	if err != nil {
		t.Fatal(err)
	}
	dest := webhooktest.NewDestination(t, false)
	dest.FailWith(http.StatusInternalServerError)
	leaf := fmt.Sprintf("nats-leaf://site:%s@127.0.0.1:%d", hubPasswords["site"], h.leafPort)
	sites := []string{"site1", "site2"}
	dbs := map[string]*sql.DB{}
	for _, site := range sites {
		w := worldIn(t, t.TempDir())
		run := start(t, nil, append([]string{"run", "--db", w.db, "--listen", "127.0.0.1:" + strconv.Itoa(freePort(t)),
			"--hub-url", leaf, "--hub-stream", "ORDERS", "--hub-filter", "orders." + site + ".>", "--edge-domain", site,
			"--stream", "ORDERS_EDGE", "--schema", w.schema, "--apply", balanceApply, "--log-format", "json"}, webhookArgs(dest, fastPlan...)...)...)
		t.Cleanup(func() { run.signal(syscall.SIGTERM); run.wait(time.Minute) })
		publishAt(t, pub, "orders."+site+".pay", makeEvents(randFor(t), pub, 3))
		db := w.ledgerDB()
		consumertest.Eventually(t, 2*time.Minute, "3 effects in review at "+site, func() bool {
			return count(t, db, `SELECT count(*) FROM outbox WHERE status = 'review'`) == 3
		})
		dbs[site] = db
	}
	discoveredFromOperators(t, h.url(), sites)

	pwFile := func(user string) string {
		f := filepath.Join(t.TempDir(), user)
		if err := os.WriteFile(f, []byte(hubPasswords[user]), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	as := func(user string, args ...string) (string, int) {
		return cli(t, append(args, "--nats", h.url(), "--nats-user", user, "--nats-password-file", pwFile(user))...)
	}
	// The viewer reads, and its action is not answered: nothing changes.
	if out, code := as("viewer", "status", "--site", "site1"); code != 3 || !strings.Contains(out, "ATTENTION 3 outbox rows in review") {
		t.Fatalf("status --site as the viewer: exit %d, want 3\n%s", code, out)
	}
	if out, code := as("viewer", "outbox", "resolve", "--site", "site1", "--status", "review", "--as", "failed", "--all", "--who", "viewer", "--api-timeout", "3s"); code == 0 {
		t.Fatalf("outbox resolve as the viewer: exit 0\n%s", out)
	}
	for _, site := range sites {
		if out, code := as("operator", "status", "--site", site); code != 3 || !strings.Contains(out, "ATTENTION 3 outbox rows in review") {
			t.Fatalf("status --site %s as the operator: exit %d, want 3\n%s", site, code, out)
		}
		if out, code := as("operator", "outbox", "resolve", "--site", site, "--status", "review", "--as", "failed", "--all",
			"--who", "ops@hub", "--note", "the provider has none"); code != 0 || !strings.Contains(out, "3 done, 0 skipped") {
			t.Fatalf("outbox resolve --site %s as the operator: exit %d\n%s", site, code, out)
		}
		if out, code := as("operator", "status", "--site", site); code != 0 || strings.Contains(out, "ATTENTION") {
			t.Fatalf("status --site %s once settled: exit %d, want 0\n%s", site, code, out)
		}
		if n := count(t, dbs[site], `SELECT count(*) FROM jetledger_audit WHERE who = 'ops@hub'`); n != 3 {
			t.Fatalf("%s's ledger holds %d records of the operator's actions, want 3", site, n)
		}
	}
	// The sites' leaf user is no client; nor is nobody.
	if out, code := as("site", "status", "--site", "site1"); code == 0 || !strings.Contains(strings.ToLower(out), "authorization") {
		t.Fatalf("status as the sites' leaf user: exit %d, want refused\n%s", code, out)
	}
	if out, code := cli(t, "status", "--nats", h.url(), "--site", "site1"); code == 0 || !strings.Contains(strings.ToLower(out), "authorization") {
		t.Fatalf("status with no user: exit %d, want refused\n%s", code, out)
	}
}

// discoveredFromOperators waits until micro's discovery, asked from the
// operators' account, answers with the API of every site.
func discoveredFromOperators(t *testing.T, url string, sites []string) {
	t.Helper()
	nc, err := nats.Connect(url, nats.UserInfo("operator", hubPasswords["operator"]))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	consumertest.Eventually(t, time.Minute, "every site's admin API found from the operators' account", func() bool {
		inbox := nc.NewRespInbox()
		sub, err := nc.SubscribeSync(inbox)
		if err != nil {
			return false
		}
		defer sub.Unsubscribe()
		if nc.PublishRequest("$SRV.INFO."+admin.ServiceName, inbox, nil) != nil {
			return false
		}
		seen := map[string]bool{}
		for len(seen) < len(sites) {
			msg, err := sub.NextMsg(3 * time.Second)
			if err != nil {
				break
			}
			var info micro.Info
			if json.Unmarshal(msg.Data, &info) == nil {
				seen[info.Metadata["site"]] = true
			}
		}
		return len(seen) == len(sites)
	})
}
