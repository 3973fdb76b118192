-- 0001 once created processed_messages_processed_at; an edit of that released
-- migration removed it, so databases made before the edit still have it.
-- Drop it everywhere: every database at one schema version is the same.
DROP INDEX IF EXISTS processed_messages_processed_at;
