-- The NATS server a run reached its stream through (its URL, without
-- credentials), so that the commands that pair the ledger with a server
-- later (status, ledger prune, dlq requeue) ask that one by default.
ALTER TABLE jetledger_consumers ADD COLUMN server_url TEXT;
