-- Set when a send attempt's outcome was unknown (a timeout after the request
-- left, a gateway error) and the row was re-queued for an idempotent sink:
-- the item may be at the destination even though the row is not 'sent', so
-- cancelling or giving up must not report it gone.
ALTER TABLE outbox ADD COLUMN maybe_sent INTEGER NOT NULL DEFAULT 0;
