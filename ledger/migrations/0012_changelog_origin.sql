-- Where the ledger's changelog began, when it began from a file that was a
-- copy of another instance of the log (the log deleted and begun again, or
-- renamed by an upgrade): that instance and the entry the file held last.
-- A copy of the old instance that holds no more than that may give way to
-- the new log's snapshot; one that holds more may not, as the new log lacks
-- what it holds. A table of its own, not columns of jetledger_changelog: a
-- standby refuses changes to a table of another shape, and the two sides of
-- a partition are upgraded one after the other.
CREATE TABLE jetledger_changelog_origin (
    id  INTEGER PRIMARY KEY CHECK (id = 1),
    log TEXT    NOT NULL,
    seq INTEGER NOT NULL
);
