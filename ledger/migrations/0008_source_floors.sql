-- A stream that copies another (sources it) may lose its copy (deleted, or
-- its store lost) while the ledger survives; made again, it would copy the
-- source's older messages once more, and those whose rows were pruned would
-- be applied a second time. Before prune removes rows, it records here the
-- source's sequence below which they came from, so that a copy made again
-- starts there. Opaque names and numbers: the ledger knows nothing of NATS.
CREATE TABLE jetledger_source_floors (
    stream      TEXT    NOT NULL CHECK (stream <> ''),  -- the copy, whose rows are pruned
    source      TEXT    NOT NULL CHECK (source <> ''),  -- the stream it copies
    instance    TEXT    NOT NULL,                       -- which instance of the source ('' unknown)
    below       INTEGER NOT NULL CHECK (below > 0),     -- the source's sequence; pruned rows came from below it
    recorded_at INTEGER NOT NULL,                       -- unix milliseconds, first recorded for this instance
    PRIMARY KEY (stream, source)
) WITHOUT ROWID;
