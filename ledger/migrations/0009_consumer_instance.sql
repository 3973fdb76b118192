-- The stream instance (the stream's name and creation time, as the consumer
-- writes it) that run last served for each pair, so that replay and prune can
-- refuse a stream of the same name that is another instance (another
-- server's, or one created since): reasoning about what it holds would apply
-- or prune by messages this ledger never saw (DESIGN.md rule 13). NULL: the
-- pair was recorded before this column, or by a caller that named none.
ALTER TABLE jetledger_consumers ADD COLUMN stream_instance TEXT;
