-- The highest stream sequence of a dead letter removed (discarded, or
-- requeued by a person): its message was handled, and a copy that no
-- longer holds the row has still seen it. Without it, the check that a copy
-- holds every acknowledged message took a copy whose newest dead letter was
-- discarded through the admin API for one lacking that message, and no copy
-- of the partition would own it again (a long nemesis schedule).
CREATE TABLE jetledger_removed (
    id  INTEGER PRIMARY KEY CHECK (id = 1),
    seq INTEGER NOT NULL
);
