package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"text/tabwriter"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/ledger"
)

const statusHelp = `
One screen of what matters: the stream (first and last sequence, messages,
duplicate window), the consumer (AckWait against the plan of the given timing
flags, pending, waiting for ack, redelivered), the ledger (rows, size, oldest),
the outbox per state, dead letters and conflicts. Exit 1 when a part cannot be
read or the consumer's AckWait is unsafe.`

type streamStatus struct {
	Name            string        `json:"name"`
	FirstSeq        uint64        `json:"first_seq"`
	LastSeq         uint64        `json:"last_seq"`
	Messages        uint64        `json:"messages"`
	DuplicateWindow time.Duration `json:"duplicate_window_ns"`
}

type consumerStatus struct {
	Name             string        `json:"name"`
	AckWait          time.Duration `json:"ack_wait_ns"`
	PlanAckWait      time.Duration `json:"plan_ack_wait_ns"`
	Safe             bool          `json:"safe"`
	Pending          uint64        `json:"pending"`
	AckPending       int           `json:"ack_pending"`
	Redelivered      int           `json:"redelivered"`
	AckFloorSeq      uint64        `json:"ack_floor_seq"`
	ServerMaxDeliver int           `json:"server_max_deliver"`
}

type statusReport struct {
	Stream   *streamStatus           `json:"stream,omitempty"`
	Consumer *consumerStatus         `json:"consumer,omitempty"`
	Ledger   *ledger.Stats           `json:"ledger,omitempty"`
	Outbox   map[ledger.Status]int64 `json:"outbox,omitempty"`
	Problems []string                `json:"problems,omitempty"`
}

func statusCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	n := natsFlags{url: defaultNATS}
	var db, stream, durable string
	var asJSON bool
	var pf planFlags
	fs := newFlags("status", "status [flags]", statusHelp, stdout)
	fs.StringVar(&db, "db", "jetledger.db", "SQLite ledger file")
	n.register(fs, "NATS server URL")
	fs.StringVar(&stream, "stream", "EVENTS", "stream")
	fs.StringVar(&durable, "durable", consumer.DurableDefault, "durable consumer")
	fs.BoolVar(&asJSON, "json", false, "print JSON")
	pf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	plan, err := pf.plan()
	if err != nil {
		return err
	}
	var rep statusReport
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()

	if _, err := os.Stat(db); err != nil {
		rep.Problems = append(rep.Problems, fmt.Sprintf("ledger %s: %v", db, err))
	} else if st, err := ledger.Open(db, ledger.Config{}); err != nil {
		rep.Problems = append(rep.Problems, err.Error())
	} else {
		defer st.Close()
		if s, err := st.Stats(ctx); err != nil {
			rep.Problems = append(rep.Problems, err.Error())
		} else {
			rep.Ledger = &s
		}
		if oc, err := st.OutboxCounts(ctx); err != nil {
			rep.Problems = append(rep.Problems, err.Error())
		} else {
			rep.Outbox = oc
		}
	}

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	if nc, js, err := connect(ctx, n, quiet); err != nil {
		rep.Problems = append(rep.Problems, err.Error())
	} else {
		defer nc.Close()
		if s, err := js.Stream(ctx, stream); err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("stream %s: %v", stream, err))
		} else if info, err := s.Info(ctx); err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("stream %s: %v", stream, err))
		} else {
			rep.Stream = &streamStatus{stream, info.State.FirstSeq, info.State.LastSeq, info.State.Msgs, info.Config.Duplicates}
		}
		if c, err := js.Consumer(ctx, stream, durable); err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("consumer %s/%s: %v", stream, durable, err))
		} else if info, err := c.Info(ctx); err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("consumer %s/%s: %v", stream, durable, err))
		} else {
			verr := plan.Validate(info.Config)
			if verr != nil {
				rep.Problems = append(rep.Problems, verr.Error())
			}
			rep.Consumer = &consumerStatus{durable, info.Config.AckWait, plan.AckWait(), verr == nil, info.NumPending, info.NumAckPending,
				info.NumRedelivered, info.AckFloor.Stream, info.Config.MaxDeliver}
		}
	}

	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		printStatus(stdout, rep)
	}
	if len(rep.Problems) > 0 {
		return fmt.Errorf("%d problem(s): %s", len(rep.Problems), rep.Problems[0])
	}
	return nil
}

func printStatus(w io.Writer, r statusReport) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	if s := r.Stream; s != nil {
		fmt.Fprintf(tw, "stream\t%s\tseq %d..%d, %d messages, duplicate window %s\n", s.Name, s.FirstSeq, s.LastSeq, s.Messages, s.DuplicateWindow)
	}
	if c := r.Consumer; c != nil {
		safe := "ok"
		if !c.Safe {
			safe = "UNSAFE"
		}
		fmt.Fprintf(tw, "consumer\t%s\tAckWait %s (plan needs %s: %s), %d pending, %d waiting for ack, %d redelivered, acked through seq %d\n",
			c.Name, c.AckWait, c.PlanAckWait, safe, c.Pending, c.AckPending, c.Redelivered, c.AckFloorSeq)
	}
	if l := r.Ledger; l != nil {
		oldest := "-"
		if l.Processed > 0 {
			oldest = l.Oldest.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "ledger\t%s\t%d rows, %d bytes, oldest %s\n", l.Path, l.Processed, l.SizeBytes, oldest)
		fmt.Fprintf(tw, "dead letters\t%d\t\nconflicts\t%d\t\n", l.DeadLetters, l.Conflicts)
	}
	if r.Outbox != nil {
		fmt.Fprint(tw, "outbox\t")
		for _, s := range ledger.Statuses {
			fmt.Fprintf(tw, "%s %d  ", s, r.Outbox[s])
		}
		fmt.Fprintln(tw, "\t")
	}
	for _, p := range r.Problems {
		fmt.Fprintf(tw, "PROBLEM\t%s\t\n", p)
	}
}
