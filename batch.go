package iceberg

import (
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	ice "github.com/apache/iceberg-go"
	"github.com/icewriter/iceberg/internal/changes"
	"github.com/icewriter/iceberg/internal/encode"
	"github.com/icewriter/iceberg/internal/keyindex"
)

// batch is a sealed buffer on its way to the catalog: a header the pipeline owns (its sequence number, counters,
// checkpoints and place in the queue) and one part per stage, each written by that stage only: the rows the
// pipeline accepted (in), the files the encoder wrote (enc), what the key stage derived for the commit (keys)
// and a Router's bulk phase (bulk).
type batch struct {
	Seq   int64
	Rows  int64
	Bytes int64
	// firstAt is when the batch's first row was accepted (lag reports).
	FirstAt  time.Time
	Token    string
	HasToken bool
	// positions are the source positions (partition -> position) the batch's checkpoints recorded, the newest
	// per partition; with WithCheckpoints they cover every row of those partitions in the batch and before it.
	Positions map[string]string
	// posSince is when the batch's oldest checkpoint of each partition in positions was marked (PositionLags).
	PosSince map[string]time.Time
	// uncovered (WithCheckpoints) lists the partitions of a batch sealed without a checkpoint (the memory limit
	// was reached first): a run may end after it only once later checkpoints cover them.
	Uncovered map[string]struct{}
	Staged    bool // its files are written: the commit loop may take it
	Handed    bool // given to the committer: its files may be referenced, so they are never deleted
	// solo: a batch of one partition's uncovered rows (sealLocked splits such rows by partition: bySource),
	// which Source.Abort may drop while no commit took it; dropped: it did, and the batch left the queue (its
	// encoder, if still running, deletes what it wrote).
	Solo, Dropped bool
	SegIdx        int // the segment of the run the batch went into

	In   batchRows           // the pipeline's: the rows accepted
	enc  batchFiles          // the encoder's: the files written
	keys batchKeys           // the key stage's: what upserts and deletes become at the commit
	bulk encode.Bulk[*batch] // a Router's bulk phase (the encoder's bulk files)
}

// batchRows are the records of a batch, one entry per record in each slice, as the pipeline accepted them; the
// encoder replaces recs (and clears hashes and sels) with the rows a keyed batch keeps (keyStage.resolve).
type batchRows struct {
	Recs    []arrow.RecordBatch
	Kinds   []opKind          // per record: insert, upsert or delete
	Sources []string          // per record: its source partition
	Sizes   []int64           // per record: the bytes the memory limit counts
	Undos   [][]*changes.Undo // per record: the versions to restore if it is dropped (open or solo batches only)
	Hashes  [][]uint64        // per record: its rows' key hashes (resolveHash) when its call computed them, else nil
	Sels    [][]int32         // per record: the rows of it the batch holds (batchRecord.sel), nil: all
	Schema  *arrow.Schema     // the table schema the inserted and upserted records were conformed to
	Keyed   bool              // holds an upsert or a delete
}

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
}
