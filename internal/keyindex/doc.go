// Package keyindex holds the key index's data structures outside its key store: the keys of a data file the
// writer wrote (FileKeys), which written rows each new data file holds (RowMap, so that the index learns a
// batch's keys without reading its files back), and what the index keeps of a data file besides its keys, with
// how its memory budget counts it (FileRef, RowIDs, DeleteFileBytes). The key encoding is keyenc's, the key
// table and its spilled runs store's, position delete files posdelete's; the index's I/O, locking and its part
// in a run stay with the writer's key stage.
package keyindex
