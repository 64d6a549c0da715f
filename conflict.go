package iceberg

import "github.com/icewriter/iceberg/internal/commit"

// ConflictCause says which part of the table moved when the catalog rejected a commit attempt as a conflict:
// another commit landed first and the attempt's requirements no longer hold. A retry rebuilds the attempt on the
// reloaded table.
type ConflictCause = commit.ConflictCause

const (
	// ConflictBranch: the branch head the attempt was built on moved (another writer committed first), or the
	// branch was created or removed meanwhile.
	ConflictBranch = commit.ConflictBranch
	// ConflictSchema: the table's schema changed (its current schema or its last column ID).
	ConflictSchema = commit.ConflictSchema
	// ConflictPartitioning: the default partition spec, the last partition ID or the default sort order changed.
	ConflictPartitioning = commit.ConflictPartitioning
	// ConflictCatalog: the catalog refused the swap without saying which requirement failed
	// (table.ErrCommitFailed: a REST 409, an SQL catalog's metadata location that moved underneath it, a Hive
	// lock not acquired).
	ConflictCatalog = commit.ConflictCatalog
)
