package iceberg

// Names the external tests need that users do not get.

// WithRowGroupRowsForTest sets the Parquet row-group limit of the files the writer encodes (not an option
// users get): small values make files of many row groups, which the key index must read in row order.
func WithRowGroupRowsForTest(n int) Option { return func(o *options) { o.rowGroupRows = n } }

// DeadLetterWired reports whether the writer's base conformer routes bad Arrow rows to WithDeadLetter without
// schema evolution (the view must build its conformers with the writer's hooks).
func DeadLetterWired(w *Writer) bool {
	c := w.view.conformer()
	return c.hooks != nil && c.hooks.deadLetter != nil
}

// OrphanSweepDone returns a channel closed once the removal of the writer ID's orphans that NewWriter started
// has returned (closed at once when it started none).
func OrphanSweepDone(w *Writer) <-chan struct{} {
	if w.sweep == nil {
		done := make(chan struct{})
		close(done)
		return done
	}
	return w.sweep.done
}

// WithFanoutForTest lowers the partitions of a fan-out chunk and the fan-out warning's threshold (fanout.go), so
// that a small test batch takes several chunks and is reported.
func WithFanoutForTest(chunkPartitions, warnPartitions int) Option {
	return func(o *options) {
		o.fanout = fanoutLimits{chunkPartitions: chunkPartitions, warnPartitions: warnPartitions}
	}
}
