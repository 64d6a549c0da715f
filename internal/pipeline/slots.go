package pipeline

import (
	"golang.org/x/sync/semaphore"
)

// Slots is what the pipeline grants a batch's encoding (Env[B].encode) beyond its own encoder slot:
// the idle slots of its encoders (sem) it may take for extra parts, and the seal policy (flushRows, flushBytes)
// as it was when the batch's encoding began, which bounds how many.
type Slots struct {
	Sem                   *semaphore.Weighted
	FlushRows, FlushBytes int64
}

// Parts returns how many files of their own the rows of a batch about to be encoded (rows rows, bytes bytes,
// after its resolve) are written as at once, and a func that returns the encoder slots the extra parts took
// (pipeline.encode holds the batch's own).
//
// The rule: a batch is cut only into parts the seal policy would have sealed on their own, each at least its
// rows (WithFlushRows) or its bytes (WithFlushBytes), and only into as many as encoder slots are idle
// (MaxInFlight, a Router's shared pool). A batch the policy sealed is about one part's size, so a stream is
// unchanged: its batches already encode MaxInFlight at once, one file each (about twice one encoder's rate on
// two cores). What this reaches is a batch far past the policy with nothing else to encode, written by one
// encoder while the other cores idle: a call larger than the policy (one Write of millions of rows), or the
// rows a checkpointed writer carried across seals until its final flush. Cutting a smaller batch (the rest of
// a stream at Close) would buy speed with files smaller than the policy makes, more of them per commit and
// more for compaction to merge: never done.
func (s Slots) Parts(rows, bytes int64) (int, func()) {
	flushRows, flushBytes := s.FlushRows, s.FlushBytes
	most := int64(1)
	if flushRows > 0 {
		most = max(most, rows/flushRows)
	}
	if flushBytes > 0 {
		most = max(most, bytes/flushBytes)
	}
	extra := 0
	for int64(extra+1) < most && s.Sem.TryAcquire(1) {
		extra++
	}
	return extra + 1, func() {
		if extra > 0 {
			s.Sem.Release(int64(extra))
		}
	}
}
