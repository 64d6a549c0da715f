package iceberg

import (
	"slices"

	ice "github.com/apache/iceberg-go"
)

// dataFileCount is the number of data files the batch wrote.
func (b *batch) dataFileCount() int { return len(b.enc.files) + b.enc.packed.Len() }

// dataFiles appends the data files the encoder wrote for the batch to dst, the packed ones decoded.
func (b *batch) dataFiles(dst []ice.DataFile) ([]ice.DataFile, error) {
	dst = append(dst, b.enc.files...)
	if b.enc.packed == nil {
		return dst, nil
	}
	return b.enc.packed.Unpack(dst)
}

// filePaths returns the paths of the batch's data and delete files: the encoder's, less those the key stage
// wrote again (replaced), plus its rewrites.
func (b *batch) filePaths() []string {
	var out []string
	add := func(p string) {
		if !slices.Contains(b.keys.replaced, p) {
			out = append(out, p)
		}
	}
	for _, f := range append(b.enc.files[:len(b.enc.files):len(b.enc.files)], b.enc.deletes...) {
		add(f.FilePath())
	}
	for i := range b.enc.packed.Len() {
		// A pack is decoded by this writer's own code from bytes it encoded: an entry that does not decode
		// is a defect, and its file is left for orphan removal rather than guessed at.
		if df, err := b.enc.packed.File(i); err == nil {
			add(df.FilePath())
		}
	}
	for _, f := range b.keys.rewritten {
		out = append(out, f.FilePath())
	}
	return out
}
