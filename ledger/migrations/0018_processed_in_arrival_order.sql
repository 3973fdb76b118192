-- Ledger rows in arrival order (issue 45). processed_messages was clustered
-- by message_id: a batch of random ids (webhook providers', UUIDv4s,
-- hashes) wrote a page of the table per id, through the WAL and its fsync,
-- and cost 4-6x what ids that grow cost. Its rows are now kept by seq, in
-- the order they are applied, so a batch writes at the table's end whatever
-- its ids; ids are found through sorted fingerprints of sealed runs of rows
-- (processed_runs, processed_fingerprints) and an in-memory filter.
--
-- The rows of the old layout stay where they are, renamed, and age out
-- through prune: no copy of a week of rows in this migration. Lookups read
-- both tables until then. legacy_alter_table keeps the rename from
-- rewriting views and triggers that name processed_messages: they go on
-- naming the table of new rows.
PRAGMA legacy_alter_table = ON;
ALTER TABLE processed_messages RENAME TO processed_messages_v1;
PRAGMA legacy_alter_table = OFF;
CREATE TABLE processed_messages (
    seq            INTEGER PRIMARY KEY, -- arrival order; never reused within a run of the ledger
    message_id     TEXT    NOT NULL,
    stream         TEXT    NOT NULL,
    stream_seq     INTEGER NOT NULL,
    subject        TEXT    NOT NULL,
    payload_sha256 BLOB    NOT NULL,
    processed_at   INTEGER NOT NULL, -- unix milliseconds
    last_seq       INTEGER NOT NULL DEFAULT 0,
    last_seen_at   INTEGER NOT NULL DEFAULT 0 -- unix milliseconds
);
CREATE INDEX processed_messages_stream_last_seq ON processed_messages (stream, last_seq);
-- A sealed run covers the seqs first..last. Its rows' fingerprints, sorted,
-- are in processed_fingerprints rows chunk0 on, 16 bytes a row (fingerprint,
-- seq, both big-endian); los holds the first fingerprint of each of those
-- chunks, 8 bytes each. Written once, dropped once no row of the run is left.
CREATE TABLE processed_runs (
    first  INTEGER PRIMARY KEY,
    last   INTEGER NOT NULL,
    chunk0 INTEGER NOT NULL,
    los    BLOB    NOT NULL
);
CREATE TABLE processed_fingerprints (
    chunk INTEGER PRIMARY KEY,
    pairs BLOB    NOT NULL
);
