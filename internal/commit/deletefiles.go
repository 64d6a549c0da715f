package commit

// DeleteFiles says which kinds of delete files a merge-on-read writer may add to a table (WithDeleteFiles), for
// the readers of the table: some cannot apply equality deletes (Snowflake, Unity Catalog), some no delete files
// at all, and equality deletes cost every reader until compaction.
type DeleteFiles int

const (
	// AnyDeleteFiles: position deletes (format version 2) or deletion vectors (version 3) from the key index,
	// and equality deletes on the key for a commit the index cannot cover (it is off, over its budget, or
	// another writer changed the table since it was built). The default.
	AnyDeleteFiles DeleteFiles = iota
	// NoEqualityDeletes: never equality deletes; a commit the key index cannot cover rewrites the data files
	// holding its keys instead (copy-on-write), and so does every commit while the index is off.
	NoEqualityDeletes
	// NoEqualityDeletesOrFail: never equality deletes; Upsert and Delete return ErrEqualityDeletesRefused while
	// the key index is off, and a commit the index can no longer cover fails with it (the writer stops:
	// ErrWriterFailed wraps it; reopen the writer, which rebuilds the index, and replay from LastCheckpoint).
	NoEqualityDeletesOrFail
	// NoDeleteFiles: no delete files at all: every upsert and delete rewrites the data files holding its keys
	// (copy-on-write), whatever WithMode says.
	//
	// Deprecated: use WithMode(CopyOnWrite), which does the same.
	NoDeleteFiles
)

// String names the choice as its constant does.
func (d DeleteFiles) String() string {
	switch d {
	case AnyDeleteFiles:
		return "AnyDeleteFiles"
	case NoEqualityDeletes:
		return "NoEqualityDeletes"
	case NoEqualityDeletesOrFail:
		return "NoEqualityDeletesOrFail"
	case NoDeleteFiles:
		return "NoDeleteFiles"
	}
	return "unknown"
}
