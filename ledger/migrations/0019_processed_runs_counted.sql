-- Each batch counts the runs of fingerprints, to see one sealed or dropped:
-- through this index, not the rows of processed_runs with their blobs
-- (153 runs of 2 KB each at 10 million ids, read every batch).
CREATE INDEX processed_runs_last ON processed_runs (last);
