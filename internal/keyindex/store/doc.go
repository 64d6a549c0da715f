// Package store holds the key index's locations: an in-memory hash table from a key (keyenc's encoding) to the
// rows that hold it (Table), and the sorted runs it spills to local disk past the index's memory budget
// (Store). It knows keys only as bytes and rows only as a Loc; what a file is, and when a row is live, is the
// key index's.
package store
