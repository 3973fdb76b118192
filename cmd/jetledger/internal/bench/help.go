package bench

// Help is `jetledger bench --help`'s text: what the runs are and print.
const Help = `
Measure jetledger against plain JetStream in one run, on an embedded server
in a temporary directory:

    (a) raw       a plain JetStream consume-and-ack loop: no ledger, no guarantee
    (b) per-msg   jetledger with one transaction per message (fetched in
                  batches like (c), each message committed and acked alone)
    (c) group     jetledger with group commit (--batch) and the --apply balance handler
    (d) failing   (c) with a handler that fails one message in --fail-every,
                  once, after writing (the ledger undoes it)
    (e) expert    a hand-written batch loop over the same SQLite: Fetch
                  --batch, one transaction with a prepared INSERT OR IGNORE
                  of the id and the balance upsert per message, commit, ack
                  each (no deadline, dead letters or conflict check)

It publishes --messages messages (payloads padded to --payload-bytes),
consumes them with each mode on its own durable, and prints messages/s, the
ratios c/a, c/b, d/c and c/e, p50/p99/p99.9/max latency (publish to commit
on disk) of (c) at each offered load of --rate for --latency-duration
(measured from each message's due time, so a server that falls behind the
load counts) with the same figures for each stage of that time (publish
ack, receipt, batch start, commit, commit on disk, ack sent) and each
stage's mean over the slowest 1 %, ledger bytes per message
(processed_messages with its runs of fingerprints, and events, each with
its indexes, from SQLite's dbstat, and the whole file), and peak RSS of
this process. With
--rss-messages N it also runs 'jetledger run' as a child process over N
messages already in the stream, then 'jetledger run' with its own embedded
server (the edge default, with --memory-limit from --rss-memory-limit) while
'jetledger publish' sends it N messages, and reports each one's peak RSS
(VmHWM).

The ids published are ULIDs (--id-kind ulid: in time order, as 'jetledger
publish' makes them) or 32 random hex digits (--id-kind random: as webhook
providers, UUIDv4 publishers and hashes give). With --ledger-rows N it also
runs (c) on a ledger pre-filled with N rows of random ids (in two sorted
sweeps: about 13 s a million rows here) over the same messages, and prints
(c_N) and c_N/c: what a ledger that has run for a while costs. Each (c)
reads its ledger's index of ids before its clock starts, as 'jetledger run'
does before its first batch; the time the pre-filled one took is printed.

With --prune-rows N it pre-fills a ledger with N rows past any retention,
each with its events row, and copies it. On the first it runs the latency at
the first --rate and (c) over the same messages; on the copy it runs both
again while run's prune removes those rows on the consumer's ledger. It
prints p50, p99 and messages/s of each, their ratios, and what the prune
removed meanwhile: what pruning a week of rows costs the batches.

The embedded server syncs its store as --sync-interval says, as run's does
(default always: every write before its publish is acked); the publish rate
(acked publishes per second, 2 000 in flight) shows the cost most plainly.

With --partitions (such as 1,2,4) it runs the scale benchmark instead of
(a)-(d): a 3-node JetStream cluster inside this process on loopback (each
node with its own store, syncing as --sync-interval says), and for each
partition count N a stream of its own (R3, file storage) partitioned into N
by the account token as 'run --partitions N --subjects pay.*' does, filled
with --scale-messages messages over 100 accounts, consumed by (a) one raw
consume+ack loop over the whole stream, (a_N) N raw loops in parallel, one
per partition, and (c_N) N jetledger consumers in parallel, one durable and
one ledger per partition (batch --batch, the balance handler). Clients
connect to the nodes round robin. It prints aggregate messages/s (the
stream's messages over the wall time until the last consumer is done), the
ratios c_N/a and c_N/a_N, and each partition's share and rate. --messages,
--rate and the other flags of (a)-(d) are not used then.

With --with-changelog as well it runs, after (c_N), (c_N+cl): N jetledger
consumers again, on fresh durables and fresh ledgers, each ledger with its
partition's changelog (R3, created by the partition's client; its take-over
done before the clock starts), so that every batch's changes are stored in
the changelog before its commit, as 'run --changelog' does. It prints the
rate of (c_N+cl), its ratio to (c_N) and the bytes the changelog streams
hold per message.`
