-- The streams and durable consumers that run served from this database, so
-- that the commands reading it need no --stream on a host with one consumer.
-- Names only: the ledger knows nothing of NATS. Prefixed because handlers'
-- tables share the file, and a migration must not meet one of theirs.
CREATE TABLE jetledger_consumers (
    stream     TEXT    NOT NULL CHECK (stream <> ''),
    durable    TEXT    NOT NULL CHECK (durable <> ''),
    first_seen INTEGER NOT NULL, -- unix milliseconds
    last_seen  INTEGER NOT NULL, -- unix milliseconds
    PRIMARY KEY (stream, durable)
) WITHOUT ROWID;
