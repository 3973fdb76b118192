-- One row per applied message id. The row is inserted in the same transaction
-- as the handler's change, so its presence means "the effect is committed".
CREATE TABLE processed_messages (
    message_id     TEXT    NOT NULL PRIMARY KEY,
    stream         TEXT    NOT NULL,
    stream_seq     INTEGER NOT NULL,
    subject        TEXT    NOT NULL,
    payload_sha256 BLOB    NOT NULL,
    processed_at   INTEGER NOT NULL -- unix milliseconds
) WITHOUT ROWID;
-- Pruning and replay go by stream position; processed_at is only filtered on,
-- so it has no index of its own (one index less per message: time and bytes).
CREATE INDEX processed_messages_stream_seq ON processed_messages (stream, stream_seq);

-- Same id, different payload: recorded, never applied (rule 10).
CREATE TABLE conflicts (
    id              INTEGER PRIMARY KEY,
    message_id      TEXT    NOT NULL,
    stream          TEXT    NOT NULL,
    stream_seq      INTEGER NOT NULL,
    subject         TEXT    NOT NULL,
    existing_sha256 BLOB    NOT NULL,
    new_sha256      BLOB    NOT NULL,
    payload         BLOB,
    seen_at         INTEGER NOT NULL,
    UNIQUE (message_id, stream, stream_seq)
);

-- Messages given up on, with the reason; keyed by stream position so a
-- redelivered message that fails again updates its row instead of adding one.
CREATE TABLE dead_letters (
    id         INTEGER PRIMARY KEY,
    message_id TEXT    NOT NULL, -- '' when the message had no Nats-Msg-Id
    stream     TEXT    NOT NULL,
    stream_seq INTEGER NOT NULL,
    subject    TEXT    NOT NULL,
    headers    TEXT    NOT NULL, -- JSON object of header name to values
    payload    BLOB,
    reason     TEXT    NOT NULL,
    deliveries INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    UNIQUE (stream, stream_seq)
);
