package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/ledger"
)

const outboxHelp = `
Inspect and operate the outbox of external side effects.

Subcommands:
  list [--status S]       rows, oldest first (S: queued, sending, sent, failed,
                          review, cancelled, suppressed)
  review                  rows whose send has an unknown outcome: a person decides
  cancel ID               queued/failed: cancelled, nothing was sent; sending:
                          marked cancelled, the item is deleted at the destination
                          when its send returns; sent: deleted at the destination
                          (--webhook-delete-url) first, cancelled only if that worked
  resolve ID --as sent --external-id X | --as failed
                          settle a row in review after checking the destination
  retry ID                put a failed row back in the queue

Each prints what it did and exits 1 when it could not.`

func outboxCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	withID := []string{"cancel", "resolve", "retry"}
	sub, id, rest, err := subcommand(args, "jetledger outbox <list|review|cancel|resolve|retry> [ID] [flags]", outboxHelp, withID, stdout)
	if err != nil {
		return err
	}
	needsID := slices.Contains(withID, sub)
	var db, status, as, ext string
	var asJSON bool
	var limit int
	var wf webhookFlags
	fs := newFlags("outbox "+sub, "outbox "+sub+" [ID] [flags]", outboxHelp, stdout)
	fs.StringVar(&db, "db", "jetledger.db", "SQLite ledger file")
	fs.BoolVar(&asJSON, "json", false, "print JSON")
	switch sub {
	case "list":
		fs.StringVar(&status, "status", "", "only rows in this status")
		fs.IntVar(&limit, "limit", 100, "most rows to list (0: all)")
	case "review":
		fs.IntVar(&limit, "limit", 100, "most rows to list (0: all)")
	case "cancel":
		wf.register(fs)
	case "resolve":
		fs.StringVar(&as, "as", "", "sent or failed (required)")
		fs.StringVar(&ext, "external-id", "", "the destination's id for the item (required with --as sent)")
	case "retry":
	default:
		return usagef("unknown subcommand %q: want list, review, cancel, resolve or retry", sub)
	}
	if err := parse(fs, rest); err != nil {
		return err
	}
	if needsID && id == "" {
		return usagef("outbox %s needs the row's id", sub)
	}
	if status != "" && !validStatus(ledger.Status(status)) {
		return usagef("--status %q: want one of %s", status, statusNames())
	}
	st, err := openExisting(db)
	if err != nil {
		return err
	}
	defer st.Close()

	report := func(it ledger.OutboxItem, did string) error {
		if asJSON {
			return json.NewEncoder(stdout).Encode(map[string]any{"result": did, "row": it})
		}
		fmt.Fprintf(stdout, "%s: %s (now %s)\n", it.ID, did, it.Status)
		return nil
	}
	switch sub {
	case "list", "review":
		if sub == "review" {
			status = string(ledger.StatusReview)
		}
		items, err := st.ListOutbox(ctx, ledger.Status(status), limit)
		if err != nil {
			return err
		}
		return printList(stdout, asJSON, items, "ID\tSTATUS\tMESSAGE ID\tSINK\tATTEMPTS\tEXTERNAL ID\tUPDATED\tERROR",
			func(it ledger.OutboxItem) string {
				return fmt.Sprintf("%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s", it.ID, it.Status, it.MessageID, it.Sink, it.Attempts,
					it.ExternalID, it.UpdatedAt.Format(time.RFC3339), it.Error)
			})
	case "cancel":
		sink, err := wf.sink()
		if err != nil {
			return err
		}
		if sink == nil {
			sink = noDeleteSink{}
		}
		d, err := consumer.NewDispatcher(st, consumer.DispatcherConfig{Sink: sink})
		if err != nil {
			return usageError{err}
		}
		out, err := d.Cancel(ctx, id)
		if err != nil {
			return err
		}
		it, err := st.Get(ctx, id)
		if err != nil {
			return err
		}
		return report(it, string(out))
	case "resolve":
		if as != string(ledger.StatusSent) && as != string(ledger.StatusFailed) {
			return usagef("--as %q: want sent or failed", as)
		}
		if as == string(ledger.StatusSent) && ext == "" {
			return usagef("--as sent needs --external-id: the destination's id for the item")
		}
		if err := st.Resolve(ctx, id, ledger.Status(as), ext); err != nil {
			return err
		}
		it, err := st.Get(ctx, id)
		if err != nil {
			return err
		}
		return report(it, "resolved as "+as)
	case "retry":
		if err := st.Retry(ctx, id); err != nil {
			return err
		}
		it, err := st.Get(ctx, id)
		if err != nil {
			return err
		}
		return report(it, "queued again; a running 'jetledger run' with the sink will send it")
	}
	return nil
}

func validStatus(s ledger.Status) bool {
	for _, v := range ledger.Statuses {
		if v == s {
			return true
		}
	}
	return false
}

func statusNames() string {
	names := make([]string, len(ledger.Statuses))
	for i, s := range ledger.Statuses {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// noDeleteSink stands in when outbox cancel is given no --webhook-delete-url:
// rows never sent can still be cancelled; sent ones cannot be deleted.
type noDeleteSink struct{}

func (noDeleteSink) Name() string { return "webhook" }
func (noDeleteSink) Send(context.Context, ledger.OutboxItem) (string, error) {
	return "", errors.New("not sending")
}
func (noDeleteSink) Delete(context.Context, string) error {
	return errors.New("no --webhook-delete-url given, so the item cannot be deleted at the destination")
}
func (noDeleteSink) Idempotent() bool       { return false }
func (noDeleteSink) Timeout() time.Duration { return 10 * time.Second }
