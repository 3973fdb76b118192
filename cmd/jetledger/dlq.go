package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/consumer/requeue"
	"github.com/jetledger/jetledger/internal/adminctl"
	"github.com/jetledger/jetledger/internal/table"
	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/service"
	"github.com/nats-io/nats.go"
)

// dlqCmd is `jetledger dlq`: operate the dead letters.
type dlqCmd struct {
	dbFlag
	jsonFlag
	List    dlqListCmd    `cmd:"" help:"dead letters, oldest first"`
	Show    dlqShowCmd    `cmd:"" help:"one dead letter with its headers and payload"`
	Requeue dlqRequeueCmd `cmd:"" help:"republish the original payload and headers with the original Nats-Msg-Id, then delete the dead letter"`
	Discard dlqDiscardCmd `cmd:"" help:"delete the dead letter: nothing more will happen to it"`
}

func (dlqCmd) Help() string {
	return `Dead letters are messages given up on (a Term error, the last allowed
delivery failing, no usable Nats-Msg-Id, or the server's max-deliveries
advisory), each kept with its headers, payload and reason.`
}

// dlqID is the argument of the commands on one dead letter.
type dlqID struct {
	ID int64 `arg:"" name:"id" help:"the dead letter's numeric id (see 'dlq list')"`
}

// withStore checks the id, then runs f with the ledger of q.
func (d dlqID) withStore(q *dlqCmd, f func(*ledger.Store) error) error {
	if d.ID <= 0 {
		return usagef("want the dead letter's numeric id (see 'dlq list'), got %d", d.ID)
	}
	return q.withStore(f)
}

type dlqListCmd struct {
	apiFlags
	limitFlag
}

func (c *dlqListCmd) Run(inv *invocation, q *dlqCmd) error {
	header := []string{"ID", "MESSAGE ID", "STREAM", "SEQ", "SUBJECT", "DELIVERIES", "WHEN", "REASON"}
	row := func(d ledger.DeadLetter) []string {
		return []string{fmt.Sprint(d.ID), d.MessageID, d.Stream, fmt.Sprint(d.Sequence), d.Subject,
			fmt.Sprint(d.Deliveries), d.CreatedAt.Format(time.RFC3339), d.Reason}
	}
	if c.remote() {
		return c.with(inv, func(nc *nats.Conn, addr admin.Address) error {
			var dls admin.DeadLetters
			if err := admin.Call(inv.ctx, nc, addr, "dlq.list", nil, &dls); err != nil {
				return err
			}
			return table.Print(inv.stdout, q.JSON, dls.DeadLetters, header, row)
		})
	}
	fetch := func(st *ledger.Store) ([]ledger.DeadLetter, error) { return st.DeadLetters(inv.ctx, c.Limit) }
	return listRows(inv, q.dbFlag, q.JSON, ledger.Listing{Limit: c.Limit}, fetch, header, row)
}

type dlqShowCmd struct {
	apiFlags
	dlqID
}

func (c *dlqShowCmd) Run(inv *invocation, q *dlqCmd) error {
	if c.remote() {
		return c.with(inv, func(nc *nats.Conn, addr admin.Address) error {
			return adminctl.Show(inv.ctx, nc, addr, "dlq.show", admin.ByID{ID: c.ID}, inv.stdout)
		})
	}
	return c.dlqID.withStore(q, func(st *ledger.Store) error {
		d, err := st.DeadLetter(inv.ctx, c.ID)
		if err != nil {
			return err
		}
		if q.JSON {
			return json.NewEncoder(inv.stdout).Encode(d)
		}
		fmt.Fprintf(inv.stdout, "id          %d\nmessage id  %s\nstream      %s seq %d\nsubject     %s\ndeliveries  %d\nwhen        %s\nreason      %s\nheaders     %v\npayload     %s\n",
			d.ID, d.MessageID, d.Stream, d.Sequence, d.Subject, d.Deliveries, d.CreatedAt.Format(time.RFC3339), d.Reason, d.Headers, d.Payload)
		return nil
	})
}

type dlqDiscardCmd struct {
	apiFlags
	dlqID
	Note string `name:"note" group:"api" help:"with --nats: why, recorded with the action"`
}

func (c *dlqDiscardCmd) Run(inv *invocation, q *dlqCmd) error {
	if c.remote() {
		return c.with(inv, func(nc *nats.Conn, addr admin.Address) error {
			return admin.Call(inv.ctx, nc, addr, "dlq.discard", admin.ByID{ID: c.ID, Who: cmp.Or(c.Who, adminctl.Who()), Note: c.Note}, nil)
		})
	}
	return c.dlqID.withStore(q, func(st *ledger.Store) error {
		if err := st.DiscardDeadLetter(inv.ctx, c.ID); err != nil {
			return err
		}
		if q.JSON {
			return json.NewEncoder(inv.stdout).Encode(map[string]any{"discarded": c.ID})
		}
		fmt.Fprintf(inv.stdout, "dead letter %d discarded\n", c.ID)
		return nil
	})
}

type dlqRequeueCmd struct {
	dlqID
	Wait time.Duration `name:"wait" default:"30s" help:"at an edge: how long to wait for the copy to be sourced from the hub into the dead letter's stream; if it has not arrived by then the dead letter is kept (exit 1)"`
	NATS natsFlags     `embed:"" group:"nats" kong:"set='nats_url=',set='nats_help=NATS server URL to republish to (default: the one the ledger records its run used, else ${nats_default}); with --api, the server of the admin API of the run that owns the ledger'"`
	API  bool          `name:"api" group:"api" help:"ask the run that owns the ledger, reached at --nats (or --context), to requeue it through its admin API, recorded as --who's (the way on a partition kept by a changelog) instead of republishing from --db"`
	apiTarget
	Note string `name:"note" group:"api" help:"with --api: why, recorded with the action"`
}

func (dlqRequeueCmd) Help() string {
	return `Fix the cause first: the message is then applied exactly once. Inside the
stream's duplicate window the stream would drop the copy, so requeue refuses
(exit 1) and keeps the dead letter until the window has passed. The copy goes
only into the dead letter's own stream (at an edge, the hub's stream it
sources), under the subject that stream stores it as again (a partition's
mapping included): a server whose stream is another one is refused (exit 1)
and the dead letter is kept. At an edge the dead letter goes only once the
copy has been sourced into the edge's stream: the edge's own duplicate window
must have passed too, and if the copy does not arrive within --wait (the link
to the hub is down) the dead letter is kept (exit 1).`
}

func (c *dlqRequeueCmd) Run(inv *invocation, q *dlqCmd) error {
	cfg := requeue.Config{Wait: c.Wait, Explicit: true, Logger: quiet, Names: requeueNames}
	if err := cfg.Validate(); err != nil {
		return configUsage(err)
	}
	if c.API {
		return apiFlags{c.NATS, c.apiTarget}.with(inv, func(nc *nats.Conn, addr admin.Address) error {
			var r admin.Requeued
			if err := admin.Call(inv.ctx, nc, addr, "dlq.requeue", admin.ByID{ID: c.ID, Who: cmp.Or(c.Who, adminctl.Who()), Note: c.Note}, &r); err != nil {
				return err
			}
			return sayRequeued(inv, q, r)
		})
	}
	return c.dlqID.withStore(q, func(st *ledger.Store) error {
		d, err := st.DeadLetter(inv.ctx, c.ID)
		if err != nil {
			return err
		}
		if err := requeue.Check(d); err != nil {
			return reworded{err, fmt.Sprintf("dead letter %d has no Nats-Msg-Id, so a republish could not be deduplicated; publish its payload with 'jetledger publish --id ID' and discard it", c.ID)}
		}
		c.NATS.orRecorded(inv.ctx, q.DB, service.Want{Stream: d.Stream})
		nc, js, err := connect(inv.ctx, c.NATS, quiet)
		if err != nil {
			return err
		}
		defer nc.Close()
		r, err := requeue.Requeue(inv.ctx, js, st, d, cfg)
		if err != nil {
			return requeueAdvice(err, d)
		}
		return sayRequeued(inv, q, admin.RequeuedOf(c.ID, d, r))
	})
}

func sayRequeued(inv *invocation, q *dlqCmd, r admin.Requeued) error {
	if q.JSON {
		return json.NewEncoder(inv.stdout).Encode(r)
	}
	_, err := fmt.Fprintln(inv.stdout, r)
	return err
}

// requeueNames are what requeue's refusals call its settings.
var requeueNames = map[string]string{"Wait": "--wait", "JetStream": "--nats (or the NATS context)", "Consumer": "run"}

// requeueAdvice is a refused requeue's error with what to do about it
// (requeue.Error.Say), publishing by hand said with 'jetledger publish'; a
// copy not sourced in time is said by requeue itself, with --wait.
func requeueAdvice(err error, d ledger.DeadLetter) error {
	if errors.Is(err, requeue.ErrNotDiscarded) {
		return reworded{err, fmt.Sprintf("%v: run 'jetledger dlq discard %d'", err, d.ID)}
	}
	var re *requeue.Error
	if !errors.As(err, &re) {
		return err
	}
	advice := re.SayCommand(requeueNames, d.MessageID)
	if advice == "" {
		return err
	}
	return reworded{err, err.Error() + ": " + advice}
}
