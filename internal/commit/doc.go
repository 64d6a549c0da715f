// Package commit holds how the writer commits to the catalog: the transaction helper every CommitTable goes
// through (Env.Commit: retries with backoff, per-table gates, fencing checks, proofs of lost replies), the
// fence that takes a writer ID over (Fence), the snapshot-summary markers and table-property mirrors it reads
// (Ancestors, FindNonce, TableEpoch, MirrorTrusted), the source positions' side files and where a branch's
// live (FindPositions, WritePositionsFile), the tables commits leave (Tables) and the classification of a
// refused attempt (ConflictCause). It never imports the root package: the writer passes what it needs (a
// Reporter for its hooks). The root package aliases the names users see (ConflictCause, ErrFenced,
// ErrCommitStateUnknown, ErrPositionMoved, CommitKind).
package commit
