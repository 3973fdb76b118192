package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/jetledger/jetledger/ledger"
	"github.com/jetledger/jetledger/publisher"
	"github.com/nats-io/nats.go"
)

const dlqHelp = `
Operate the dead letters: messages given up on (a Term error, the last allowed
delivery failing, no usable Nats-Msg-Id, or the server's max-deliveries
advisory), each kept with its headers, payload and reason.

Subcommands:
  list            dead letters, oldest first (--limit, --json)
  show ID         one dead letter with its headers and payload
  requeue ID      republish the original payload and headers, with the
                  original Nats-Msg-Id, to the original subject, then delete
                  the dead letter: fix the cause first; the message is applied
                  once. Refused while the stream's duplicate window still
                  remembers the id (the stream would drop the copy).
  discard ID      delete the dead letter: nothing more will happen to it`

// errStillInWindow: requeue published into a stream that dropped the copy.
var errStillInWindow = errors.New("the stream's duplicate window still holds this id, so it dropped the copy")

func dlqCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	withID := []string{"show", "requeue", "discard"}
	sub, idArg, rest, err := subcommand(args, "jetledger dlq <list|show|requeue|discard> [ID] [flags]", dlqHelp, withID, stdout)
	if err != nil {
		return err
	}
	needsID := slices.Contains(withID, sub)
	var db string
	var asJSON bool
	var limit int
	n := natsFlags{url: defaultNATS}
	fs := newFlags("dlq "+sub, "dlq "+sub+" [ID] [flags]", dlqHelp, stdout)
	fs.StringVar(&db, "db", "jetledger.db", "SQLite ledger file")
	fs.BoolVar(&asJSON, "json", false, "print JSON")
	switch sub {
	case "list":
		fs.IntVar(&limit, "limit", 100, "most rows to list (0: all)")
	case "requeue":
		n.register(fs, "NATS server URL to republish to")
	case "show", "discard":
	default:
		return usagef("unknown subcommand %q: want list, show, requeue or discard", sub)
	}
	if err := parse(fs, rest); err != nil {
		return err
	}
	var id int64
	if needsID {
		if id, err = strconv.ParseInt(idArg, 10, 64); err != nil || id <= 0 {
			return usagef("dlq %s needs the dead letter's numeric id (see 'dlq list'), got %q", sub, idArg)
		}
	}
	st, err := openExisting(db)
	if err != nil {
		return err
	}
	defer st.Close()
	enc := json.NewEncoder(stdout)
	switch sub {
	case "list":
		dls, err := st.DeadLetters(ctx, limit)
		if err != nil {
			return err
		}
		return printList(stdout, asJSON, dls, "ID\tMESSAGE ID\tSTREAM\tSEQ\tSUBJECT\tDELIVERIES\tWHEN\tREASON",
			func(d ledger.DeadLetter) string {
				return fmt.Sprintf("%d\t%s\t%s\t%d\t%s\t%d\t%s\t%s", d.ID, d.MessageID, d.Stream, d.Sequence, d.Subject,
					d.Deliveries, d.CreatedAt.Format(time.RFC3339), d.Reason)
			})
	case "show":
		d, err := st.DeadLetter(ctx, id)
		if err != nil {
			return err
		}
		if asJSON {
			return enc.Encode(d)
		}
		fmt.Fprintf(stdout, "id          %d\nmessage id  %s\nstream      %s seq %d\nsubject     %s\ndeliveries  %d\nwhen        %s\nreason      %s\nheaders     %v\npayload     %s\n",
			d.ID, d.MessageID, d.Stream, d.Sequence, d.Subject, d.Deliveries, d.CreatedAt.Format(time.RFC3339), d.Reason, d.Headers, d.Payload)
		return nil
	case "discard":
		if err := st.DiscardDeadLetter(ctx, id); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "dead letter %d discarded\n", id)
		return nil
	}
	// requeue
	d, err := st.DeadLetter(ctx, id)
	if err != nil {
		return err
	}
	if d.MessageID == "" {
		return fmt.Errorf("dead letter %d has no Nats-Msg-Id, so a republish could not be deduplicated; publish its payload with 'jetledger publish --id ID' and discard it", id)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	nc, js, err := connect(ctx, n, quiet)
	if err != nil {
		return err
	}
	defer nc.Close()
	p, err := publisher.New(js, publisher.Config{Logger: quiet})
	if err != nil {
		return err
	}
	ack, err := p.Publish(ctx, publisher.Message{Subject: d.Subject, Data: d.Payload, ID: d.MessageID, Header: nats.Header(d.Headers)})
	if err != nil {
		return fmt.Errorf("requeue dead letter %d: %w; it is kept", id, err)
	}
	if ack.Duplicate {
		return fmt.Errorf("requeue dead letter %d (id %s): %w; it is kept: try again once the window has passed", id, d.MessageID, errStillInWindow)
	}
	if err := st.DiscardDeadLetter(ctx, id); err != nil {
		return fmt.Errorf("requeued as %s seq %d, but removing the dead letter failed: %w", ack.Stream, ack.Sequence, err)
	}
	if asJSON {
		return enc.Encode(map[string]any{"requeued": id, "message_id": d.MessageID, "stream": ack.Stream, "seq": ack.Sequence})
	}
	fmt.Fprintf(stdout, "dead letter %d requeued as %s seq %d with its original id %s\n", id, ack.Stream, ack.Sequence, d.MessageID)
	return nil
}
