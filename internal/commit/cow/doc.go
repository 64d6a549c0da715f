// Package cow is copy-on-write for one attempt of a run's commit: it plans which data files hold the keys a
// segment upserts or deletes (pruning, bloom filters, then the key columns), rewrites them without those rows,
// and on format version 3 keeps row lineage (a rewritten row keeps its _row_id; an upserted row takes the id of
// the row it replaces). The committer reaches it through commit.CowAttempt.
package cow
