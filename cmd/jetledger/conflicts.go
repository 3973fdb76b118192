package main

import (
	"cmp"
	"fmt"
	"time"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/internal/adminctl"
	"github.com/jetledger/jetledger/internal/table"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
)

// conflictsCmd is `jetledger conflicts`: ids reused with another payload,
// each needing a person until acknowledged.
type conflictsCmd struct {
	dbFlag
	jsonFlag
	List conflictsListCmd `cmd:"" help:"conflicts, oldest first, with both payloads' hashes and whether they were acknowledged"`
	Show conflictsShowCmd `cmd:"" help:"one conflict; with --nats both messages, decoded, while their streams hold them"`
	Ack  conflictsAckCmd  `cmd:"" help:"acknowledge a conflict, settled with its sender, with --note saying how: it no longer needs a person"`
}

type conflictsListCmd struct {
	apiFlags
	limitFlag
}

func (c *conflictsListCmd) Run(inv *invocation, q *conflictsCmd) error {
	header := []string{"ID", "MESSAGE ID", "STREAM", "SEQ", "APPLIED SHA256", "NEW SHA256", "SEEN", "ACKNOWLEDGED BY"}
	row := func(c ledger.ConflictRecord) []string {
		return []string{fmt.Sprint(c.ID), c.MessageID, c.Stream, fmt.Sprint(c.Sequence), c.ExistingSHA256.String()[:16],
			c.NewSHA256.String()[:16], c.SeenAt.Format(time.RFC3339), c.By}
	}
	if !c.remote() {
		fetch := func(st *ledger.Store) ([]ledger.ConflictRecord, error) { return st.Conflicts(inv.ctx, c.Limit) }
		return listRows(inv, q.dbFlag, q.JSON, ledger.Listing{Limit: c.Limit}, fetch, header, row)
	}
	return c.with(inv, func(nc *nats.Conn, addr admin.Address) error {
		var cs admin.Conflicts
		if err := admin.Call(inv.ctx, nc, addr, "conflicts.list", nil, &cs); err != nil {
			return err
		}
		return table.Print(inv.stdout, q.JSON, cs.Conflicts, header, row)
	})
}

type conflictsShowCmd struct {
	apiFlags
	ID int64 `arg:"" name:"id" help:"the conflict's id (see 'conflicts list')"`
}

func (c *conflictsShowCmd) Run(inv *invocation, q *conflictsCmd) error {
	if c.remote() {
		return c.with(inv, func(nc *nats.Conn, addr admin.Address) error {
			return adminctl.Show(inv.ctx, nc, addr, "conflicts.show", admin.ByID{ID: c.ID}, inv.stdout)
		})
	}
	return q.withStore(func(st *ledger.Store) error {
		rec, applied, ok, err := st.Conflict(inv.ctx, c.ID)
		if err != nil {
			return err
		}
		out := map[string]any{"conflict": rec, "payloads": "read with --nats: the run reads both messages from their streams"}
		if ok {
			out["applied"] = applied
		}
		return adminctl.Print(inv.stdout, out)
	})
}

type conflictsAckCmd struct {
	apiFlags
	ID   int64  `arg:"" name:"id" help:"the conflict's id (see 'conflicts list')"`
	Note string `name:"note" required:"" help:"how it was settled with the sender (recorded)"`
}

func (c *conflictsAckCmd) Run(inv *invocation, q *conflictsCmd) error {
	who := cmp.Or(c.Who, adminctl.Who())
	if c.remote() {
		return c.with(inv, func(nc *nats.Conn, addr admin.Address) error {
			return admin.Call(inv.ctx, nc, addr, "conflicts.ack", admin.ByID{ID: c.ID, Who: who, Note: c.Note}, nil)
		})
	}
	return q.withStore(func(st *ledger.Store) error {
		return st.AcknowledgeConflict(inv.ctx, c.ID, ledger.Audit{Who: who, From: "jetledger conflicts ack --db", Note: c.Note})
	})
}
