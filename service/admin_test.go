package service

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
)

// ambiguous is a sink whose every send may or may not have arrived: each
// row goes to review.
type ambiguous struct{}

func (ambiguous) Name() string           { return "amb" }
func (ambiguous) Idempotent() bool       { return false }
func (ambiguous) Timeout() time.Duration { return time.Second }
func (ambiguous) Send(context.Context, ledger.OutboxItem) (string, error) {
	return "", &outbox.SendError{Kind: outbox.ErrAmbiguous, Detail: "timed out"}
}

// Issue 43: review rows of a partition kept by a changelog, settled through
// the owner's admin API over NATS: the action and its record are in the
// standby's copy, as the owner's own transactions are (no
// --leave-changelog, which settling one row needed before).
func TestAnActionThroughTheAdminAPIIsInTheStandbysCopy(t *testing.T) {
	t.Parallel()
	srv := consumertest.RunServer(t)
	nc, js := consumertest.Connect(t, srv)
	a, b := newOwnedHost(t, srv.ClientURL(), "a", 0), newOwnedHost(t, srv.ClientURL(), "b", 0)
	a.cfg.Sink, b.cfg.Sink = ambiguous{}, ambiguous{}
	a.start()
	consumertest.Eventually(t, time.Minute, "a owns the partition", func() bool { return hasSnapshot(t, js) })
	b.start()
	publish(t, js, 0, 3)
	addr := admin.Address{Stream: "S", Durable: "d"}
	var dry admin.Acted
	consumertest.Eventually(t, time.Minute, "3 rows in review, seen through the API", func() bool {
		err := call(nc, addr, "outbox.resolve", admin.Act{Who: "ops", Status: ledger.StatusReview, As: ledger.StatusFailed, DryRun: true}, &dry)
		return err == nil && dry.Matched == 3
	})
	var owner admin.Status
	consumertest.Eventually(t, time.Minute, "the owner's status: 3 applied, none left to deliver", func() bool {
		return call(nc, addr, "status", admin.StatusRequest{Quick: true}, &owner) == nil && owner.Applied == 3 && owner.Pending != nil && *owner.Pending == 0
	})
	var done admin.Acted
	if err := call(nc, addr, "outbox.resolve", admin.Act{Who: "ops@example", IDs: dry.IDs, Seen: dry.Seen, As: ledger.StatusFailed, Note: "not at the destination"}, &done); err != nil || len(done.Done) != 3 {
		t.Fatalf("resolve through the API: %v %+v", err, done)
	}
	consumertest.Eventually(t, time.Minute, "the standby's copy holds the 3 rows failed and their 3 records", func() bool {
		return count(t, b.cfg.DB, `SELECT count(*) FROM outbox WHERE status = 'failed'`) == 3 &&
			count(t, b.cfg.DB, `SELECT count(*) FROM jetledger_audit WHERE who = 'ops@example'`) == 3
	})
	// The standby answers reads of its copy, and refuses actions naming
	// the owner.
	at := admin.Address{Stream: "S", Durable: "d", Standby: true}
	var st admin.Status
	consumertest.Eventually(t, time.Minute, "the standby's API saying the 3 rows failed", func() bool {
		return call(nc, at, "status", nil, &st) == nil && st.Outbox[ledger.StatusFailed] == 3
	})
	if st.Role != "standby" || st.Owner != "a" {
		t.Fatalf("the standby's status: %+v, want role standby, owner a", st)
	}
	var e *admin.Error
	err := call(nc, at, "outbox.retry", admin.Act{Who: "ops", IDs: dry.IDs, Seen: time.Now()}, nil)
	if !errors.As(err, &e) || e.Code != admin.CodeNotOwner || !strings.Contains(err.Error(), "owner is a") {
		t.Fatalf("an action asked of the standby: %v, want %s naming the owner a", err, admin.CodeNotOwner)
	}
	if n := count(t, b.cfg.DB, `SELECT count(*) FROM outbox WHERE status = 'failed'`); n != 3 {
		t.Fatalf("the standby's copy after a refused action: %d rows failed, want 3", n)
	}
	a.halt()
	b.halt()
}

func call(nc *nats.Conn, a admin.Address, endpoint string, req, resp any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return admin.Call(ctx, nc, a, endpoint, req, resp)
}

// count runs a count query on the ledger file at db, read only; -1 if it
// cannot.
func count(t *testing.T, db, query string) int {
	t.Helper()
	d, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
	if err != nil {
		return -1
	}
	defer d.Close()
	n := -1
	if err := d.QueryRow(query).Scan(&n); err != nil {
		return -1
	}
	return n
}
