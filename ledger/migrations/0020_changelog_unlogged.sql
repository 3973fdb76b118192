-- A pipelined batch of an owned partition commits here while its changelog
-- entry is still on its way to the log: this row says which entry (log,
-- the entry it follows, its last part's seq and message id) and holds the
-- changeset that undoes the batch, S2-compressed (a batch's changes are
-- tens of KB). While the
-- ledger's position is still that entry, the batch is not known to be in
-- the log: whoever opens the file next asks the log, and undoes the batch
-- if its entry did not land (nothing of it was acked or sent). Never part
-- of a changelog entry: written after each entry's changes are taken, and
-- only by owners.
CREATE TABLE jetledger_unlogged (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    log   TEXT    NOT NULL,
    after INTEGER NOT NULL,
    seq   INTEGER NOT NULL,
    entry TEXT    NOT NULL,
    undo  BLOB    NOT NULL
);
