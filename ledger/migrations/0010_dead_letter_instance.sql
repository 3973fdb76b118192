-- A dead letter names the stream instance it came from (the stream's name
-- and creation time, as the consumer writes it): a stream deleted and made
-- again counts from sequence 1 again, and keyed by (stream, stream_seq)
-- alone a new instance's dead letter was merged into an old one's row,
-- keeping the old id and payload (DESIGN.md rule 13). '' for rows recorded
-- before this column. SQLite cannot change a table's UNIQUE constraint, so
-- the table is rebuilt with its rows and ids.
CREATE TABLE dead_letters_new (
    id              INTEGER PRIMARY KEY,
    message_id      TEXT    NOT NULL, -- '' when the message had no Nats-Msg-Id
    stream          TEXT    NOT NULL,
    stream_instance TEXT    NOT NULL DEFAULT '',
    stream_seq      INTEGER NOT NULL,
    subject         TEXT    NOT NULL,
    headers         TEXT    NOT NULL, -- JSON object of header name to values
    payload         BLOB,
    reason          TEXT    NOT NULL,
    deliveries      INTEGER NOT NULL,
    created_at      INTEGER NOT NULL,
    UNIQUE (stream, stream_instance, stream_seq)
);
INSERT INTO dead_letters_new (id, message_id, stream, stream_seq, subject, headers, payload, reason, deliveries, created_at)
    SELECT id, message_id, stream, stream_seq, subject, headers, payload, reason, deliveries, created_at FROM dead_letters;
DROP TABLE dead_letters;
ALTER TABLE dead_letters_new RENAME TO dead_letters;
