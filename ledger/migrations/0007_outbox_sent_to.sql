-- Where a row's sends may have gone, as its sink named the destination just
-- before the claim: the destination instance (a stream's name and creation
-- time) and its position there then (the stream's last sequence). A lookup
-- reads from there, and may say "never seen" only from that same instance
-- (DESIGN.md rule 13). NULL: the sink names no instance, the sends may have
-- gone to more than one, or the row predates this column; nothing then proves
-- the item never arrived.
ALTER TABLE outbox ADD COLUMN sent_to_instance TEXT;
ALTER TABLE outbox ADD COLUMN sent_to_position INTEGER;
