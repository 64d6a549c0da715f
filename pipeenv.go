package iceberg

import (
	"context"

	"github.com/icewriter/iceberg/internal/encode"
	"github.com/icewriter/iceberg/internal/pipeline"
)

// pipeEnv is the writer as its pipeline sees it (pipeline.Env): the stages a batch goes through after its seal.
type pipeEnv struct{ w *Writer }

func (e pipeEnv) NewBatch() *batch { return &batch{} }

func (e pipeEnv) Encode(ctx context.Context, b *batch, slots pipeline.Slots) error {
	return e.w.encode(ctx, b, slots)
}

// BulkClosed gives the batch whose rows a closed bulk file holds that file, for its commit.
func (e pipeEnv) BulkClosed(c encode.ClosedSpan[*batch]) {
	held := fileMetaBytes(c.Schema)
	c.Holder.enc.files = append(c.Holder.enc.files, c.DF)
	c.Holder.enc.held += held
	c.Holder.enc.runHeld += held
}

func (e pipeEnv) Commit(ctx context.Context, batches []*batch) (func(context.Context, int64), error) {
	run, res, err := e.w.commit(ctx, batches)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, n int64) { e.w.committed(ctx, run, batches, res, n) }, nil
}

func (e pipeEnv) Failure(err error) error                         { return e.w.failure(err) }
func (e pipeEnv) RemoveFiles(ctx context.Context, paths []string) { e.w.removeFiles(ctx, paths) }
func (e pipeEnv) LoopDone()                                       { e.w.loopDone() }
