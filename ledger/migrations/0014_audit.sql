-- Every action a person takes on the ledger (through the admin API): who,
-- from where, what, on which row, when, with a note. Written in the
-- action's own transaction, so a changelog carries it with the action.
CREATE TABLE jetledger_audit (
    id     INTEGER PRIMARY KEY,
    at     INTEGER NOT NULL,
    who    TEXT    NOT NULL,
    origin TEXT    NOT NULL,
    action TEXT    NOT NULL,
    target TEXT    NOT NULL,
    note   TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX jetledger_audit_target ON jetledger_audit (target);
