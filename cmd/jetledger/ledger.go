package main

import (
	"cmp"
	"encoding/hex"
	"fmt"
	"github.com/jetledger/jetledger/service"
	"maps"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/jetledger/jetledger/ledger"
)

// ledgerCmd is `jetledger ledger`: inspect the ledger database.
type ledgerCmd struct {
	dbFlag
	jsonFlag
	Stats     ledgerStatsCmd     `cmd:"" help:"rows, size, oldest and newest entries, conflicts, dead letters, the consumers run served"`
	Conflicts ledgerConflictsCmd `cmd:"" help:"messages whose id was reused with a different payload, with both payload hashes"`
	Prune     ledgerPruneCmd     `cmd:"" help:"remove rows no redelivery or republish can meet, then vacuum; reads the stream's bounds from --nats"`
	Backup    ledgerBackupCmd    `cmd:"" help:"write a consistent copy of the ledger, safely while run writes it: to move a partition to another host"`
}

func (ledgerCmd) Help() string { return "Dead letters have a command of their own: 'jetledger dlq'." }

type ledgerStatsCmd struct{}

// ledgerStats is what `ledger stats` prints.
type ledgerStats struct {
	ledger.Stats
	Consumers []ledger.Consumer `json:"consumers"` // the streams and durables run served, the last first
}

func (ledgerStatsCmd) Run(inv *invocation, l *ledgerCmd) error {
	return l.withStore(func(st *ledger.Store) error {
		s, err := st.Stats(inv.ctx)
		if err != nil {
			return err
		}
		cs, err := st.Consumers(inv.ctx)
		if err != nil {
			return err
		}
		if l.JSON {
			return printJSON(inv.stdout, ledgerStats{s, cs})
		}
		tw := tabwriter.NewWriter(inv.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "database\t%s\nschema version\t%d\nsize\t%d bytes\nprocessed messages\t%d\n", s.Path, s.SchemaVersion, s.SizeBytes, s.Processed)
		if s.Processed > 0 {
			fmt.Fprintf(tw, "oldest\t%s\nnewest\t%s\n", s.Oldest.Format(time.RFC3339), s.Newest.Format(time.RFC3339))
		}
		fmt.Fprintf(tw, "conflicts\t%d\ndead letters\t%d\n", s.Conflicts, s.DeadLetters)
		for i, c := range cs {
			label := ""
			if i == 0 {
				label = "run served"
			}
			fmt.Fprintf(tw, "%s\tstream %s, durable %s, last at %s\n", label, c.Stream, c.Durable, c.LastSeen.Format(time.RFC3339))
		}
		return tw.Flush()
	})
}

type ledgerConflictsCmd struct {
	limitFlag
}

func (c *ledgerConflictsCmd) Run(inv *invocation, l *ledgerCmd) error {
	fetch := func(st *ledger.Store) ([]ledger.ConflictRecord, error) { return st.Conflicts(inv.ctx, c.Limit) }
	return listRows(inv, l.dbFlag, l.JSON, ledger.Listing{Limit: c.Limit}, fetch, []string{"MESSAGE ID", "STREAM", "SEQ", "SUBJECT", "APPLIED SHA256", "NEW SHA256", "SEEN"},
		func(c ledger.ConflictRecord) []string {
			return []string{c.MessageID, c.Stream, fmt.Sprint(c.Sequence), c.Subject,
				hex.EncodeToString(c.ExistingSHA256)[:16], hex.EncodeToString(c.NewSHA256)[:16], c.SeenAt.Format(time.RFC3339)}
		})
}

type ledgerPruneCmd struct {
	NATS        natsFlags `embed:"" group:"nats" kong:"set='nats_url=',set='nats_help=NATS server URL, to read the first sequence and duplicate window of the stream (default: the one the ledger records its run used, else ${nats_default})'"`
	streamFlags `set:"durable_help=the durable consumer of run: messages it has not handled yet keep their ids' rows"`
	retentionFlags
}

func (ledgerPruneCmd) Help() string {
	return `Removes processed_messages rows older than --retention whose messages are
gone from the stream (below its first sequence) and outside its duplicate
window, and that the durable (--durable) has no copy of left to handle; and
sent or cancelled outbox rows older than --outbox-retention. Then vacuums.
A --retention shorter than the stream's duplicate window is refused (exit 2).
Without --stream, the stream and durable are those run recorded in the
ledger; when it recorded several, --stream says which (exit 2 until then).
A stream that is another instance than the one run last consumed (another
server's of that name, or one made again since) is refused (exit 1). For a
stream that sources another (an edge's copy of the hub's), it first records
in the ledger where in each source the pruned rows end, so that a copy made
again starts after them.`
}

// pruneResult is what `ledger prune` prints: the stream it pruned, then
// what it removed.
type pruneResult struct {
	Stream  string `json:"stream"`
	Durable string `json:"durable"`
	ledger.PruneResult
}

func (c *ledgerPruneCmd) Run(inv *invocation, l *ledgerCmd) error {
	if err := cmp.Or(c.streamFlags.validate(), c.retentionFlags.validate()); err != nil {
		return err
	}
	return l.withStore(func(st *ledger.Store) error {
		if err := c.resolve(inv.ctx, st); err != nil {
			return err
		}
		c.NATS.orRecorded(inv.ctx, l.DB, service.Want{Stream: c.Stream, Durable: c.Durable})
		nc, js, err := connect(inv.ctx, c.NATS, quiet)
		if err != nil {
			return err
		}
		defer nc.Close()
		p := pruner(st, js, c.streamFlags, c.retentionFlags, quiet)
		if err := checkRetention(inv.ctx, p); err != nil {
			return c.explain(err, l.DB)
		}
		res, err := p.Once(inv.ctx)
		if err != nil {
			return c.explain(err, l.DB)
		}
		if l.JSON {
			return printJSON(inv.stdout, pruneResult{c.Stream, c.Durable, res})
		}
		via := ""
		if o := c.origin(l.DB); o != "" {
			via = " (" + o + ")"
		}
		fmt.Fprintf(inv.stdout, "stream %s, durable %s%s: pruned %d processed_messages rows and %d outbox rows; %d pages returned to the file system\n",
			c.Stream, c.Durable, via, res.Processed, res.Outbox, res.FreedPages)
		return nil
	})
}

type ledgerBackupCmd struct {
	To    string `name:"to" required:"" placeholder:"FILE" help:"the copy: written beside it under a temporary name, checked, synced, then renamed to this"`
	Force bool   `name:"force" help:"replace a file already at --to"`
}

func (ledgerBackupCmd) Help() string {
	return `Copies the ledger --db, with every transaction committed to its WAL, as
one snapshot, while run keeps applying (a reader never blocks SQLite's
writer), or after run was stopped or killed. The copy is checked
(integrity_check), synced and renamed into place, mode 0600: there is
either a whole copy at --to or none. An existing --to is kept unless
--force; a -wal or -journal file beside --to is refused always.`
}

// backupResult is what `ledger backup` prints.
type backupResult struct {
	From string `json:"from"`
	ledger.BackupResult
}

func (c *ledgerBackupCmd) Run(inv *invocation, l *ledgerCmd) error {
	return l.withStore(func(st *ledger.Store) error {
		res, err := st.Backup(inv.ctx, c.To, ledger.BackupOptions{Force: c.Force, Names: map[string]string{"To": "--to", "Force": "--force"}})
		if err != nil { // --to the ledger, a directory, not a plain path: a usage error
			return configUsage(err)
		}
		if l.JSON {
			return printJSON(inv.stdout, backupResult{l.DB, res})
		}
		fmt.Fprintf(inv.stdout, "backed up %s to %s: %d rows, %d bytes (%d pages), integrity ok, in %s\n",
			l.DB, res.Path, res.Rows, res.SizeBytes, res.Pages, res.Elapsed.Round(time.Millisecond))
		tw := tabwriter.NewWriter(inv.stdout, 0, 4, 2, ' ', 0)
		for _, name := range slices.Sorted(maps.Keys(res.Tables)) {
			fmt.Fprintf(tw, "  %s\t%d\n", name, res.Tables[name])
		}
		return tw.Flush()
	})
}
