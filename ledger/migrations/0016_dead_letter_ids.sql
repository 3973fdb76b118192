-- A dead letter's id is never given again (AUTOINCREMENT): a person acts on
-- one by its id (dlq requeue, discard, through the admin API from a list
-- seen earlier), and SQLite gave a new row the greatest id plus one, so a
-- dead letter requeued and recorded again, or another after the newest was
-- discarded, took the id of the one removed and an action on the old id
-- reached it unseen. The table is rebuilt with its rows and ids.
CREATE TABLE dead_letters_new (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
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
INSERT INTO dead_letters_new (id, message_id, stream, stream_instance, stream_seq, subject, headers, payload, reason, deliveries, created_at)
    SELECT id, message_id, stream, stream_instance, stream_seq, subject, headers, payload, reason, deliveries, created_at FROM dead_letters;
DROP TABLE dead_letters;
ALTER TABLE dead_letters_new RENAME TO dead_letters;
