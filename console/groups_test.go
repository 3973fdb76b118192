package console_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/group"
)

// The groups page shows each group of the bucket with its members, and
// says a partition nobody owns (here, members that run nothing) as
// attention; a viewer sees it; a signed-out visitor gets the sign-in.
func TestTheGroupsPageShowsMembersAndPartitionsWithoutAnOwner(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	nc, js := consumertest.Connect(t, srv)
	for _, member := range []string{"a:1:x", "b:2:y"} {
		m, err := group.Join(t.Context(), js, group.Config{Name: "payments", Partitions: 2, Standbys: 1, Member: member, Stream: "PAY", Durable: "jetledger",
			Heartbeat: 100 * time.Millisecond, MemberTTL: time.Second, StableAfter: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
	}
	_, web := newConsole(t, nc, "/console")
	anon := newClient(t, web.URL+"/console")
	if code, body := anon.get("/groups"); code != http.StatusOK || !strings.Contains(body, `id="signin"`) {
		t.Fatalf("no session: the groups page answered %d, want the sign-in page", code)
	}
	viewer := newClient(t, web.URL+"/console")
	viewer.signIn("vic", "vic-secret")
	var body string
	consumertest.Eventually(t, time.Minute, "both members and both partitions shown", func() bool {
		var code int
		code, body = viewer.get("/groups")
		return code == http.StatusOK && strings.Contains(body, `data-member="a:1:x"`) && strings.Contains(body, `data-member="b:2:y"`) &&
			strings.Count(body, `data-state="unowned"`) == 2
	})
	for _, want := range []string{`id="group-payments"`, "PAY", "has no owner: nothing consumes it", `id="nav-groups"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the groups page lacks %q:\n%s", want, body)
		}
	}
}
