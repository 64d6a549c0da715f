package commit

import (
	"errors"
	"strings"

	"github.com/apache/iceberg-go/table"
)

// ConflictCause says which part of the table moved when the catalog rejected a commit attempt as a conflict:
// another commit landed first and the attempt's requirements no longer hold. A retry rebuilds the attempt on the
// reloaded table.
type ConflictCause string

const (
	// ConflictBranch: the branch head the attempt was built on moved (another writer committed first), or the
	// branch was created or removed meanwhile.
	ConflictBranch ConflictCause = "branch"
	// ConflictSchema: the table's schema changed (its current schema or its last column ID).
	ConflictSchema ConflictCause = "schema"
	// ConflictPartitioning: the default partition spec, the last partition ID or the default sort order changed.
	ConflictPartitioning ConflictCause = "partitioning"
	// ConflictCatalog: the catalog refused the swap without saying which requirement failed
	// (table.ErrCommitFailed: a REST 409, an SQL catalog's metadata location that moved underneath it, a Hive
	// lock not acquired).
	ConflictCatalog ConflictCause = "catalog"
)

// Cause classifies an error of CommitTable: the part of the table that moved when the catalog rejected
// the attempt because the table moved, "" for any other failure.
//
// Catalogs say "the table moved" in two ways. A lost compare-and-swap and a REST 409 wrap table.ErrCommitFailed.
// A requirement that fails validation is returned as iceberg-go's bare error, which wraps no sentinel: its SQL
// catalog (the embedded default) and every catalog built on its staging helper answer a moved branch with
// "requirement failed: branch "main" has changed: ...". So the requirement's wording is read as well: it names
// the cause, including when a REST server quotes it in its 409. Requirements whose failure no retry can cure (the
// table dropped or replaced, a tag as the target) are not conflicts.
func Cause(err error) ConflictCause {
	if err == nil {
		return ""
	}
	msg := strings.ToLower(err.Error())
	i := strings.Index(msg, "requirement failed: ")
	if i < 0 {
		if errors.Is(err, table.ErrCommitFailed) {
			return ConflictCatalog
		}
		return ""
	}
	what := msg[i+len("requirement failed: "):]
	switch {
	case strings.Contains(what, "does not exist"), strings.Contains(what, "uuid mismatch"),
		strings.Contains(what, "already exists"), strings.Contains(what, "cannot be transaction targets"):
		if errors.Is(err, table.ErrCommitFailed) {
			return ConflictCatalog
		}
		return ""
	case strings.Contains(what, "schema id"), strings.Contains(what, "field id"):
		return ConflictSchema
	case strings.Contains(what, "partition id"), strings.Contains(what, "spec id"), strings.Contains(what, "sort order"):
		return ConflictPartitioning
	case strings.Contains(what, "branch"), strings.Contains(what, "tag"), strings.Contains(what, "ref "):
		return ConflictBranch
	}
	return ConflictCatalog
}
