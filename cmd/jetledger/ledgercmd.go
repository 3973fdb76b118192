package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/ledger"
)

const ledgerHelp = `
Inspect the ledger database.

Subcommands:
  stats          rows, size, oldest and newest entries, conflicts, dead letters
  conflicts      messages whose id was reused with a different payload
  prune          remove processed_messages rows older than --retention whose
                 messages are gone from the stream (below its first sequence)
                 and outside its duplicate window, and sent/cancelled outbox
                 rows older than --outbox-retention; then vacuum. Reads the
                 stream's bounds from --nats.

Each takes --db and --json.`

func ledgerCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sub, _, rest, err := subcommand(args, "jetledger ledger <stats|conflicts|prune> [--db FILE] [--json]", ledgerHelp, nil, stdout)
	if err != nil {
		return err
	}
	var db string
	var asJSON bool
	var limit int
	fs := newFlags("ledger "+sub, "ledger "+sub+" [--db FILE] [--json]", ledgerHelp, stdout)
	fs.StringVar(&db, "db", "jetledger.db", "SQLite ledger file")
	fs.BoolVar(&asJSON, "json", false, "print JSON")
	if sub == "conflicts" {
		fs.IntVar(&limit, "limit", 100, "most rows to list (0: all)")
	}
	n := natsFlags{url: defaultNATS}
	var stream, durable string
	var retention, outboxRetention time.Duration
	if sub == "prune" {
		n.register(fs, "NATS server URL, to read the stream's first sequence and duplicate window")
		fs.StringVar(&stream, "stream", "EVENTS", "stream whose ledger rows are pruned")
		fs.StringVar(&durable, "durable", consumer.DurableDefault, "the durable consumer of run: messages it has not handled yet keep their ids' rows")
		fs.DurationVar(&retention, "retention", ledger.RetentionDefault, "least age of a pruned processed_messages row")
		fs.DurationVar(&outboxRetention, "outbox-retention", ledger.OutboxRetentionDefault, "least age of a pruned sent or cancelled outbox row")
	}
	switch sub {
	case "stats", "conflicts", "prune":
	default:
		return usagef("unknown subcommand %q: want stats, conflicts or prune (dead letters: 'jetledger dlq')", sub)
	}
	if err := parse(fs, rest); err != nil {
		return err
	}
	st, err := openExisting(db)
	if err != nil {
		return err
	}
	defer st.Close()
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	switch sub {
	case "prune":
		quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
		nc, js, err := connect(ctx, n, quiet)
		if err != nil {
			return err
		}
		defer nc.Close()
		p := &pruner{st: st, js: js, stream: stream, durable: durable, retention: retention, outboxRetention: outboxRetention, log: quiet}
		if err := p.check(ctx); err != nil {
			return err
		}
		res, err := p.once(ctx)
		if err != nil {
			return err
		}
		if asJSON {
			return enc.Encode(res)
		}
		fmt.Fprintf(stdout, "pruned %d processed_messages rows and %d outbox rows; %d pages returned to the file system\n",
			res.Processed, res.Outbox, res.FreedPages)
	case "stats":
		s, err := st.Stats(ctx)
		if err != nil {
			return err
		}
		if asJSON {
			return enc.Encode(s)
		}
		fmt.Fprintf(tw, "database\t%s\nschema version\t%d\nsize\t%d bytes\nprocessed messages\t%d\n", s.Path, s.SchemaVersion, s.SizeBytes, s.Processed)
		if s.Processed > 0 {
			fmt.Fprintf(tw, "oldest\t%s\nnewest\t%s\n", s.Oldest.Format(time.RFC3339), s.Newest.Format(time.RFC3339))
		}
		fmt.Fprintf(tw, "conflicts\t%d\ndead letters\t%d\n", s.Conflicts, s.DeadLetters)
	case "conflicts":
		cs, err := st.Conflicts(ctx, limit)
		if err != nil {
			return err
		}
		return printList(stdout, asJSON, cs, "MESSAGE ID\tSTREAM\tSEQ\tSUBJECT\tAPPLIED SHA256\tNEW SHA256\tSEEN",
			func(c ledger.ConflictRecord) string {
				return fmt.Sprintf("%s\t%s\t%d\t%s\t%s\t%s\t%s", c.MessageID, c.Stream, c.Sequence, c.Subject,
					hex.EncodeToString(c.ExistingSHA256)[:16], hex.EncodeToString(c.NewSHA256)[:16], c.SeenAt.Format(time.RFC3339))
			})
	}
	return nil
}
