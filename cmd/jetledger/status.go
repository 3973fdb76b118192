package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jetledger/jetledger/internal/adminctl"
	"github.com/jetledger/jetledger/internal/kongx"
	"github.com/jetledger/jetledger/natsconn"
	"github.com/jetledger/jetledger/service"
	"github.com/jetledger/jetledger/status"
	"github.com/nats-io/nats.go/jetstream"
)

const statusHelp = `
One screen of what matters: which stream and durable it reads (without
--stream, the ones run recorded in the ledger), the stream (first and last
sequence, messages, duplicate window), the consumer (AckWait against the plan
of the given timing flags, pending, waiting for ack, redelivered), the ledger
(rows, size, oldest), the outbox per state, dead letters and conflicts. For
a partitioned stream (run --partitions), every partition: its durable
<durable>-p<I> (pending, waiting for ack, acked through, whether a consumer
is fetching now) and its ledger <db>-p<I> when it is on this host. An
ATTENTION line for each kind of row that needs a person (review rows, dead
letters, conflicts not acknowledged): how many, where, since when, and what to
do. Exit 1 when a part cannot be read or the consumer's AckWait is unsafe;
exit 2 when --stream is left out and the ledger recorded several consumers;
exit 3 when nothing failed and something needs a person.`

// servesStatus is the stream and durable status read, and where their
// names came from: given, the ledger (as run recorded them) or the defaults.
type servesStatus struct {
	Stream  string    `json:"stream"`
	Durable string    `json:"durable"`
	From    namesFrom `json:"from"`
	origin  string
}

// statusReport is status.Report as printed: with the names read and the
// problems said in the command line's terms (its own Problems hide the
// report's).
type statusReport struct {
	Serves *servesStatus `json:"serves,omitempty"`
	status.Report
	Problems []string `json:"problems,omitempty"`
}

// statusCmd is `jetledger status`.
type statusCmd struct {
	dbFlag
	NATS natsFlags `embed:"" group:"nats" kong:"set='nats_url=',set='nats_help=NATS server URL (default: the one the ledger records its run used, else ${nats_default})'"`
	streamFlags
	Effects string        `name:"effects-stream" placeholder:"NAME" help:"at an edge: its effects stream (run --effects-stream), to count the effects not yet at the hub"`
	Site    string        `name:"site" group:"api" help:"ask, through --nats, the admin API of every run of this site (- for runs that are no edge; with --stream, of that stream) instead of reading --db: what each needs and its outbox; exit 3 when any needs a person"`
	Timeout time.Duration `name:"api-timeout" default:"10s" group:"api" help:"how long to wait for the server's answers, and with --site for the runs' (each run answers once; a site behind a slow link needs more)"`
	jsonFlag
	Plan planFlags `embed:"" group:"timing"`
}

func (statusCmd) Help() string { return statusHelp }

func (c *statusCmd) Run(inv *invocation) error {
	plan, err := c.Plan.plan()
	if err == nil {
		err = cmp.Or(c.dbFlag.validate(), c.streamFlags.validate())
	}
	if err == nil && c.Timeout <= 0 {
		err = usagef("--api-timeout %v: give a positive duration, such as 30s", c.Timeout)
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(inv.ctx, c.Timeout)
	defer cancel()
	if c.Site != "" {
		return c.remote(ctx, inv)
	}
	// Connected first, as its problem is said after the ledger's: with no
	// server, the report has no problems of a server to say after it.
	c.NATS.orRecorded(ctx, c.DB, *c.given)
	nc, js, cerr := connect(ctx, c.NATS, quiet)
	if cerr == nil {
		defer nc.Close()
	}
	r, err := service.ReadStatus(ctx, js, c.DB, *c.given, status.Config{Plan: plan, Logger: quiet, Names: consumerNames, Effects: c.Effects})
	if errors.As(err, new(*service.AmbiguousError)) {
		return usageError{err} // several recorded consumers: the user's to choose from
	} else if err != nil {
		return err
	}
	rep := statusReport{Serves: &servesStatus{r.Chosen.Stream, r.Chosen.Durable, r.Chosen.From, r.Chosen.Origin(r.NamesLedger, streamNames)}, Report: r.Report}
	for _, p := range r.Problems {
		if errors.Is(p, jetstream.ErrStreamNotFound) || errors.Is(p, jetstream.ErrConsumerNotFound) {
			p = fmt.Errorf("%w (asked the server at %s)", p, natsconn.RedactURL(c.NATS.URL))
		}
		rep.Problems = append(rep.Problems, dbHint(p).Error())
	}
	if cerr != nil { // a file of the connection's is not the ledger's
		rep.Problems = append(rep.Problems, cerr.Error())
	}
	if c.JSON {
		if err := printJSON(inv.stdout, rep); err != nil {
			return err
		}
	} else {
		printStatus(inv.stdout, rep)
	}
	if len(rep.Problems) > 0 {
		return fmt.Errorf("%d problem(s): %s", len(rep.Problems), rep.Problems[0])
	}
	if len(rep.Attention) > 0 {
		return kongx.Attention(fmt.Errorf("%d kind(s) of rows need a person (the ATTENTION lines say what, where and what to do)", len(rep.Attention)))
	}
	return nil
}

// printStatus writes the status report as text, one labelled field a line:
// the names read, the report's parts, then its problems.
func printStatus(w io.Writer, r statusReport) {
	if s := r.Serves; s != nil {
		text := "stream " + s.Stream + ", durable " + s.Durable
		if s.origin != "" {
			text += " (" + s.origin + ")"
		}
		status.WriteField(w, "serves", text)
	}
	r.WriteText(w)
	for _, p := range r.Problems {
		status.WriteField(w, "PROBLEM", p)
	}
}

// remote is status through the admin API of the runs of --site.
func (c *statusCmd) remote(ctx context.Context, inv *invocation) error {
	c.NATS.orRecorded(ctx, c.DB, *c.given)
	nc, _, err := connect(ctx, c.NATS, quiet)
	if err != nil {
		return err
	}
	defer nc.Close()
	rs, err := adminctl.Statuses(ctx, nc, c.NATS.URL, adminctl.Target{Site: c.Site, Stream: c.given.Stream, Partition: -1})
	if err != nil {
		return err
	}
	text := inv.stdout
	if c.JSON {
		if err := printJSON(inv.stdout, rs); err != nil {
			return err
		}
		text = io.Discard
	}
	switch attention, failed := adminctl.PrintStatuses(text, rs, time.Now()); {
	case failed:
		return errors.New("a run did not answer its status")
	case attention:
		return kongx.Attention(errors.New("rows need a person (the ATTENTION lines say what, where and what to do)"))
	}
	return nil
}
