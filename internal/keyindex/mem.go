package keyindex

// How the key index's budget counts what it holds for a data file besides its keys.

// memBytes estimates the memory the index holds for a data file besides its keys: what it keeps of the file's
// metadata (FileRef) and byPath's copy of its path, its deletion vector (about 2 bytes a
// deleted position: roaring's array containers, and its bitmap containers once denser), the delete files it
// replaces and those it applied, and the row ids it carries (12 bytes each). The vector and the ids grow with
// the keys upserts and deletes remove and the rows upserts carry, not only with files: the budget counts them
// so that an index cannot outgrow it by them.
func (f *File) memBytes() int64 {
	n := f.df.Bytes() + int64(len(f.df.FilePath()))
	if f.dv != nil {
		n += 64 + 2*f.dv.Cardinality()
	}
	if f.dvFile != nil {
		n += DeleteFileBytes(f.dvFile)
	}
	for _, d := range f.inherited {
		n += DeleteFileBytes(d)
	}
	for p := range f.applied {
		n += 48 + int64(len(p))
	}
	return n + f.ids.Bytes()
}

// recount counts the change of what a file's metadata holds (memBytes) since it was last counted.
func (idx *Index) recount(f *File) {
	n := f.memBytes()
	idx.grow(n - f.mem)
	f.mem = n
}
