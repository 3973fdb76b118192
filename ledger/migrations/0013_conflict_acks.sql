-- What a person decided about a conflict: acknowledged, by whom, with a
-- note. A conflict without a row here needs a person (attention). A table
-- of its own, not columns of conflicts: a standby refuses changes to a
-- table of another shape, and the two sides of a partition are upgraded
-- one after the other.
CREATE TABLE jetledger_conflict_acks (
    conflict_id     INTEGER PRIMARY KEY,
    acknowledged_at INTEGER NOT NULL,
    acknowledged_by TEXT    NOT NULL,
    note            TEXT    NOT NULL DEFAULT ''
);
