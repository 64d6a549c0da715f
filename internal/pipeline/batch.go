package pipeline

import (
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/icewriter/iceberg/internal/changes"
	"github.com/icewriter/iceberg/internal/encode"
)

// Batch is what the pipeline queues: a sealed buffer on its way to the catalog. The pipeline owns its Header;
// the other stages' parts of it (the files the encoder wrote, what the key stage derived) are the writer's,
// reached through the Env.
type Batch[B any] interface {
	comparable
	// Head returns the batch's header.
	Head() *Header[B]
	// Held returns the memory the metadata of the batch's files holds until its commit, and what it takes
	// unpacked in the run that commits it.
	Held() (held, runHeld int64)
	// FilePaths lists the files written for the batch (removed when it is dropped before any commit took it).
	FilePaths() []string
}

// Header is the part of a batch the pipeline owns: its sequence number, counters, checkpoints, place in the
// queue and the rows it accepted.
type Header[B any] struct {
	Seq   int64
	Rows  int64
	Bytes int64
	// FirstAt is when the batch's first row was accepted (lag reports).
	FirstAt  time.Time
	Token    string
	HasToken bool
	// Positions are the source positions (partition -> position) the batch's checkpoints recorded, the newest
	// per partition; with WithCheckpoints they cover every row of those partitions in the batch and before it.
	Positions map[string]string
	// PosSince is when the batch's oldest checkpoint of each partition in Positions was marked (PositionLags).
	PosSince map[string]time.Time
	// Uncovered (WithCheckpoints) lists the partitions of a batch sealed without a checkpoint (the memory limit
	// was reached first): a run may end after it only once later checkpoints cover them.
	Uncovered map[string]struct{}
	Staged    bool // its files are written: the commit loop may take it
	Handed    bool // given to the committer: its files may be referenced, so they are never deleted
	// Solo: a batch of one partition's uncovered rows (sealLocked splits such rows by partition: bySource),
	// which Source.Abort may drop while no commit took it; Dropped: it did, and the batch left the queue (its
	// encoder, if still running, deletes what it wrote).
	Solo, Dropped bool
	SegIdx        int // the segment of the run the batch went into (set when its run forms)

	In   Rows           // the rows accepted
	Bulk encode.Bulk[B] // a Router's bulk phase: the bulk file span of its rows, the files its encoding closed
}

// Rows are the records of a batch, one entry per record in each slice, as the pipeline accepted them; the
// encoder replaces Recs (and clears Hashes and Sels) with the rows a keyed batch keeps (the key stage's resolve).
type Rows struct {
	Recs    []arrow.RecordBatch
	Kinds   []changes.Kind    // per record: insert, upsert or delete
	Sources []string          // per record: its source partition
	Sizes   []int64           // per record: the bytes the memory limit counts
	Undos   [][]*changes.Undo // per record: the versions to restore if it is dropped (open or solo batches only)
	Hashes  [][]uint64        // per record: its rows' key hashes when its call computed them, else nil
	Sels    [][]int32         // per record: the rows of it the batch holds (Record.Sel), nil: all
	Schema  *arrow.Schema     // the table schema the inserted and upserted records were conformed to
	Keyed   bool              // holds an upsert or a delete
}
