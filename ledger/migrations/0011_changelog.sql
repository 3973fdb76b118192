-- Where this ledger stands in its changelog, for a partition replicated
-- to standbys: the changelog's instance, the stream sequence of the last
-- changelog message its state includes, and the owner that took it over
-- last. One row, written in the same transaction as the changes it counts,
-- and carried in the changelog with them, so a standby's copy says where
-- it stands as exactly as the owner's file does.
CREATE TABLE jetledger_changelog (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    log   TEXT    NOT NULL DEFAULT '',
    seq   INTEGER NOT NULL DEFAULT 0,
    owner TEXT    NOT NULL DEFAULT ''
);
INSERT INTO jetledger_changelog (id) VALUES (1);
