// Package keyindex is the key index of a merge-on-read writer: where every key of the table lives (data file
// and row position), so that an upsert or delete becomes a deletion vector or position delete file on that
// file instead of an equality delete. Index is the index itself, with its I/O: Load reads it from a table,
// CatchUp follows others' commits, Rebase follows the writer's compactions, and its memory budget (its own, or
// a Pool shared by a Router's tables) spills its keys to local disk. Resolver turns a table's delete files into
// positions. The other types are what the index keeps and learns: the keys of a data file the writer wrote
// (FileKeys), which written rows each new data file holds (RowMap, so that the index learns a batch's keys
// without reading its files back), and what it keeps of a data file besides its keys, with how the budget
// counts it (FileRef, RowIDs, DeleteFileBytes). The key encoding is keyenc's, the key table and its spilled
// runs store's, position delete files posdelete's. The writer's key stage owns an Index: it locks it, and
// decides what a run's keys become.
package keyindex
