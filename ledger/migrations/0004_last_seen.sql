-- Prune goes by the last stream sequence at which an id was seen (duplicates
-- and conflicts too) and counts retention from the last time it was seen: a
-- later copy still in the stream keeps the row, so a replay or a new durable
-- meets it as a duplicate (DESIGN.md rule 11). The first sequence stays in
-- stream_seq; its index gives way to one on the last.
ALTER TABLE processed_messages ADD COLUMN last_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE processed_messages ADD COLUMN last_seen_at INTEGER NOT NULL DEFAULT 0; -- unix milliseconds
UPDATE processed_messages SET last_seq = stream_seq, last_seen_at = processed_at;
-- A conflict recorded before now is a later copy of its id.
UPDATE processed_messages SET
    last_seq = max(last_seq, (SELECT max(c.stream_seq) FROM conflicts c
        WHERE c.message_id = processed_messages.message_id AND c.stream = processed_messages.stream)),
    last_seen_at = max(last_seen_at, (SELECT max(c.seen_at) FROM conflicts c
        WHERE c.message_id = processed_messages.message_id))
WHERE message_id IN (SELECT message_id FROM conflicts WHERE stream = processed_messages.stream);
-- One seen in another stream is pinned: prune goes stream by stream.
UPDATE processed_messages SET last_seq = 9223372036854775807
WHERE message_id IN (SELECT message_id FROM conflicts WHERE stream <> processed_messages.stream);
DROP INDEX processed_messages_stream_seq;
CREATE INDEX processed_messages_last_seq ON processed_messages (stream, last_seq);
