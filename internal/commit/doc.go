// Package commit holds how the writer commits to the catalog: the classification of a refused attempt as a
// conflict (ConflictCause). The root package aliases the names users see.
package commit
