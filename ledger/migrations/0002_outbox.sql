-- External side effects, claimed before they are sent (DESIGN.md rules 5-9).
-- id is a ULID and the idempotency key sent downstream.
CREATE TABLE outbox (
    id              TEXT    NOT NULL PRIMARY KEY,
    message_id      TEXT    NOT NULL,
    sink            TEXT    NOT NULL,
    payload         BLOB    NOT NULL,
    status          TEXT    NOT NULL CHECK (status IN
                        ('queued', 'sending', 'sent', 'failed', 'review', 'cancelled', 'suppressed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    claimed_by      TEXT,
    claimed_at      INTEGER,
    lease_until     INTEGER,
    -- Cancelled while a send was in flight: the owner's write-back must
    -- delete the item at the destination (or move the row to review).
    pending_delete  INTEGER NOT NULL DEFAULT 0,
    external_id     TEXT,
    error           TEXT,
    next_attempt_at INTEGER NOT NULL DEFAULT 0,
    sent_at         INTEGER,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX outbox_due ON outbox (status, sink, next_attempt_at);
CREATE INDEX outbox_message ON outbox (message_id);
