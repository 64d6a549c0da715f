package iceberg

import (
	"github.com/icewriter/iceberg/internal/pipeline"

	"github.com/apache/arrow-go/v18/arrow"
	ice "github.com/apache/iceberg-go"
	"github.com/icewriter/iceberg/internal/encode"
	"github.com/icewriter/iceberg/internal/keyindex"
)

// batch is a sealed buffer on its way to the catalog: the header the pipeline owns (pipeline.Header: sequence
// number, counters, checkpoints, the rows accepted, the bulk span) and one part per stage, each written by that
// stage only: the files the encoder wrote (enc) and what the key stage derived for the commit (keys).
type batch struct {
	pipeline.Header[*batch]
	enc  batchFiles // the encoder's: the files written
	keys batchKeys  // the key stage's: what upserts and deletes become at the commit
}

// batchRecord is one call's owned, validated record on its way into the open buffer.
type batchRecord = pipeline.Record

// Head, Held and FilePaths make batch a pipeline.Batch.
func (b *batch) Head() *pipeline.Header[*batch] { return &b.Header }
func (b *batch) Held() (held, runHeld int64)    { return b.enc.held, b.enc.runHeld }
func (b *batch) FilePaths() []string            { return b.filePaths() }

// batchFiles are what the encoder wrote for a batch, for the commit.
type batchFiles struct {
	files    []ice.DataFile
	packed   *encode.PackedFiles // the data files only the commit reads, packed (heldfiles.go); with files, all of them
	deletes  []ice.DataFile      // equality delete files
	held     int64               // memory the metadata of files and deletes holds until the commit (fileMetaBytes)
	runHeld  int64               // memory their metadata takes unpacked, in the run that commits them
	rowMap   *keyindex.RowMap    // which written rows each new data file holds (nil: unknown; see keyindex.RowMap)
	written  map[uint64]struct{} // key hashes of the rows written (writers with keys only)
	keyedSet map[uint64]struct{} // key hashes upserted or deleted (resolved.keyed)
}

// batchKeys are what the key stage prepared for the commit of a keyed batch.
type batchKeys struct {
	cowKeys  []arrow.RecordBatch // copy-on-write: key-only records of the keys upserted or deleted
	keyRecs  []arrow.RecordBatch // key index on: the keys upserted or deleted, for keyStage.apply
	fileKeys []keyindex.FileKeys // key index on: the keys of each new data file, in row order (keyStage.fileKeys)
	// rowIDs (format version 3, key index on) are the _row_id values the encoder wrote for upserted rows, by
	// key, and lineage the schema it wrote them with (encodeRowIDs); apply checks them (nil: none written).
	rowIDs  map[string]int64
	lineage *ice.Schema
	// replaced are the paths of the encoder's data files the key stage wrote again with their rows' ids
	// (carryRowIDs), and deleted; rewritten are the files that replace them.
	replaced  []string
	rewritten []ice.DataFile
}
