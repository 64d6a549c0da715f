package iceotel

import (
	"errors"

	"go.opentelemetry.io/otel/metric"
)

// instruments are the metrics the hooks record. Names, units and descriptions are listed in the README.
type instruments struct {
	// Counters.
	batches, rowsSealed, rowsCommitted, files, bytesWritten, bytesCommitted, commits, attempts, conflicts,
	retries, fenced, compactions, filesRewritten, snapshotsExpired metric.Int64Counter
	// Histograms.
	batchRows, fileSize, commitAttempts metric.Int64Histogram
	batchOpen, encode, attemptDuration, commitDuration, retryWait, compactionDuration,
	expiryDuration, backpressure metric.Float64Histogram
	// Gauges, observed from each writer's Stats and PositionLags.
	queue, uncommittedRows, bufferedRows, memory, positionOffsets metric.Int64ObservableGauge
	freshness, lastCommitAge, positionLag                         metric.Float64ObservableGauge
}

// Bucket boundaries: seconds from a millisecond to a minute, rows and bytes by powers of 4.
var (
	secondBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	rowBuckets    = []float64{1, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20}
	byteBuckets   = []float64{1 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20,
		128 << 20, 256 << 20, 512 << 20, 1 << 30}
	attemptBuckets = []float64{1, 2, 3, 5, 8, 13, 21}
)

func newInstruments(m metric.Meter) (instruments, error) {
	var in instruments
	var errs []error
	counter := func(dst *metric.Int64Counter, name, unit, desc string) {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		*dst = c
		errs = append(errs, err)
	}
	intHist := func(dst *metric.Int64Histogram, name, unit, desc string, buckets []float64) {
		h, err := m.Int64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(buckets...))
		*dst = h
		errs = append(errs, err)
	}
	seconds := func(dst *metric.Float64Histogram, name, desc string) {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(secondBuckets...))
		*dst = h
		errs = append(errs, err)
	}
	intGauge := func(dst *metric.Int64ObservableGauge, name, unit, desc string) {
		g, err := m.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		*dst = g
		errs = append(errs, err)
	}
	floatGauge := func(dst *metric.Float64ObservableGauge, name, unit, desc string) {
		g, err := m.Float64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		*dst = g
		errs = append(errs, err)
	}

	counter(&in.batches, "iceberg.writer.batches", "{batch}", "Batches sealed.")
	counter(&in.rowsSealed, "iceberg.writer.rows.sealed", "{row}", "Rows sealed into batches for encoding.")
	counter(&in.rowsCommitted, "iceberg.writer.rows.committed", "{row}", "Rows committed to the table.")
	counter(&in.files, "iceberg.writer.files", "{file}", "Files written by the encoders, by content (data, deletes).")
	counter(&in.bytesWritten, "iceberg.writer.bytes.written", "By", "Bytes of the files written by the encoders.")
	counter(&in.bytesCommitted, "iceberg.writer.bytes.committed", "By", "Bytes of the files the commits added.")
	counter(&in.commits, "iceberg.writer.commits", "{commit}", "Runs of rows committed.")
	counter(&in.attempts, "iceberg.writer.commit.attempts", "{attempt}",
		"Attempts of catalog transactions, by kind and outcome (applied, conflict, error, unsent).")
	counter(&in.conflicts, "iceberg.writer.conflicts", "{attempt}",
		"Attempts the catalog rejected because the table moved, by kind and cause.")
	counter(&in.retries, "iceberg.writer.retries", "{retry}", "Retries of transactions, by kind and the failure's cause.")
	counter(&in.fenced, "iceberg.writer.fenced", "{writer}", "Writers stopped because a newer writer took their ID over.")
	counter(&in.compactions, "iceberg.writer.compactions", "{compaction}", "Compactions, by outcome and whether automatic.")
	counter(&in.filesRewritten, "iceberg.writer.compaction.files.rewritten", "{file}", "Data files compactions rewrote.")
	counter(&in.snapshotsExpired, "iceberg.writer.snapshots.expired", "{snapshot}", "Snapshots the writer's maintenance expired.")

	intHist(&in.batchRows, "iceberg.writer.batch.rows", "{row}", "Rows per batch sealed.", rowBuckets)
	intHist(&in.fileSize, "iceberg.writer.file.size", "By", "Size of each file written.", byteBuckets)
	intHist(&in.commitAttempts, "iceberg.writer.commit.attempts.per_commit", "{attempt}",
		"Catalog attempts each committed run took.", attemptBuckets)
	seconds(&in.batchOpen, "iceberg.writer.batch.open.duration", "From a batch's first row to its seal.")
	seconds(&in.encode, "iceberg.writer.encode.duration", "Encoding and uploading a batch's files.")
	seconds(&in.attemptDuration, "iceberg.writer.commit.attempt.duration",
		"One attempt of a catalog transaction (reload, build, commit), by kind and outcome.")
	seconds(&in.commitDuration, "iceberg.writer.commit.duration",
		"A run's commit: from forming the run to its commit returning, every attempt and backoff included.")
	seconds(&in.retryWait, "iceberg.writer.retry.wait", "Backoff before a retry.")
	seconds(&in.compactionDuration, "iceberg.writer.compaction.duration", "A compaction, by outcome.")
	seconds(&in.expiryDuration, "iceberg.writer.expiry.duration", "A snapshot expiry.")
	seconds(&in.backpressure, "iceberg.writer.backpressure.duration",
		"How long a call waited for room before its rows were accepted, by the limit (memory, uncommitted).")

	intGauge(&in.queue, "iceberg.writer.queue.batches", "{batch}", "Sealed batches not yet committed (the queue's depth).")
	intGauge(&in.uncommittedRows, "iceberg.writer.uncommitted.rows", "{row}", "Rows in sealed batches not yet committed.")
	intGauge(&in.bufferedRows, "iceberg.writer.buffered.rows", "{row}", "Rows in the open buffer.")
	intGauge(&in.memory, "iceberg.writer.memory.held", "By",
		"Bytes of rows held: the open buffer and the batches waiting for or in encoding.")
	floatGauge(&in.freshness, "iceberg.writer.freshness", "s",
		"Age of the oldest row accepted and not yet committed (0: the table has every row accepted).")
	floatGauge(&in.lastCommitAge, "iceberg.writer.last_commit.age", "s", "Time since the writer's latest commit.")
	floatGauge(&in.positionLag, "iceberg.writer.position.lag", "s",
		"Per source partition: age of the oldest position checkpointed and not yet committed (0: caught up).")
	intGauge(&in.positionOffsets, "iceberg.writer.position.lag.offsets", "{position}",
		"Per source partition whose positions are integers: accepted minus committed position.")
	return in, errors.Join(errs...)
}

// gauges are the observable instruments the callback reports.
func (in *instruments) gauges() []metric.Observable {
	return []metric.Observable{in.queue, in.uncommittedRows, in.bufferedRows, in.memory, in.positionOffsets,
		in.freshness, in.lastCommitAge, in.positionLag}
}
