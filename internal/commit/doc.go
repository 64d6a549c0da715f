// Package commit holds how the writer commits to the catalog: the run a writer hands its committer (Run,
// Segment, CommitResult, with their wire form); the default committer (CatalogCommitter: a run's snapshots,
// markers, commit record and positions, the key index's position deletes or their fallback); the transaction
// helper every CommitTable goes through (Env.Commit: retries with backoff, per-table gates, fencing checks,
// proofs of lost replies); the fence that takes a writer ID over (Fence); the snapshot-summary markers and
// table-property mirrors it reads (Ancestors, FindNonce, TableEpoch, MirrorTrusted); the source positions' side
// files and where a branch's live (FindPositions, WritePositionsFile); the tables commits leave (Tables) and the
// classification of a refused attempt (ConflictCause). It never imports the root package: the writer passes
// what it needs (a Reporter for its hooks, its copy-on-write stage as CatalogCommitter.NewCow). The root
// package aliases the names users see (ConflictCause, ErrFenced, ErrCommitStateUnknown, ErrPositionMoved,
// CommitKind, Run, Segment, CommitResult, DeleteFiles).
package commit
