// Package iceotel exports what an iceberg Writer does as OpenTelemetry metrics and traces, through the writer's
// hooks (iceberg.WithHooks). It uses only the OpenTelemetry API: the application picks the SDK and the exporter
// (Prometheus, OTLP, ...), and the writer's own module links none of them.
//
//	h, err := iceotel.New(iceotel.WithMeterProvider(mp), iceotel.WithTracerProvider(tp))
//	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithHooks(h))
//
// One Hooks value serves any number of writers; every measurement names the table (iceberg.table), and the
// gauges read from a writer's Stats also its ID (iceberg.writer.id). See the package's README for the metrics
// and spans.
package iceotel // import "github.com/icewriter/iceberg/otel"

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	iceberg "github.com/icewriter/iceberg"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/icewriter/iceberg/otel"

// Attribute keys of the measurements and spans.
const (
	AttrTable      = attribute.Key("iceberg.table")          // the table, "namespace.name"
	AttrWriter     = attribute.Key("iceberg.writer.id")      // the writer ID (gauges and spans)
	AttrKind       = attribute.Key("iceberg.commit.kind")    // iceberg.CommitKind: run, compaction, ...
	AttrOutcome    = attribute.Key("iceberg.commit.outcome") // applied, conflict, error, unsent
	AttrCause      = attribute.Key("iceberg.conflict.cause") // iceberg.ConflictCause, or "error" for a retry
	AttrContent    = attribute.Key("iceberg.file.content")   // data, deletes
	AttrReason     = attribute.Key("iceberg.backpressure.reason")
	AttrPartition  = attribute.Key("iceberg.source.partition") // position gauges
	AttrAutomatic  = attribute.Key("iceberg.compaction.automatic")
	AttrSnapshotID = attribute.Key("iceberg.snapshot.id")
)

// Outcomes of a commit attempt (AttrOutcome).
const (
	OutcomeApplied  = "applied"
	OutcomeConflict = "conflict" // the catalog rejected it because the table moved
	OutcomeError    = "error"    // it reached the catalog and failed otherwise
	OutcomeUnsent   = "unsent"   // it failed before reaching the catalog (reload or build)
)

// Option configures New.
type Option func(*config)

type config struct {
	mp metric.MeterProvider
	tp trace.TracerProvider
}

// WithMeterProvider sets the meter provider. Default: the global one (otel.GetMeterProvider).
func WithMeterProvider(mp metric.MeterProvider) Option { return func(c *config) { c.mp = mp } }

// WithTracerProvider sets the tracer provider. Default: the global one (otel.GetTracerProvider).
func WithTracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tp = tp } }

// Hooks is an iceberg.Hook of every kind that records metrics and spans. Make it with New; it is safe for
// concurrent use by many writers.
type Hooks struct {
	tracer trace.Tracer
	m      instruments
	reg    metric.Registration

	mu      sync.Mutex
	writers map[*iceberg.Writer]attribute.Set  // the writers the gauges read, with their attributes
	pending map[string][]iceberg.CommitAttempt // per writer ID: the attempts of its transaction in progress
}

// New makes the hooks and their instruments.
func New(opts ...Option) (*Hooks, error) {
	c := config{}
	for _, o := range opts {
		o(&c)
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	h := &Hooks{tracer: c.tp.Tracer(ScopeName), writers: map[*iceberg.Writer]attribute.Set{},
		pending: map[string][]iceberg.CommitAttempt{}}
	meter := c.mp.Meter(ScopeName)
	var err error
	if h.m, err = newInstruments(meter); err != nil {
		return nil, err
	}
	h.reg, err = meter.RegisterCallback(h.observe, h.m.gauges()...)
	if err != nil {
		return nil, err
	}
	return h, nil
}

// Close unregisters the gauges' callback: the writers' gauges are no longer reported.
func (h *Hooks) Close() error { return h.reg.Unregister() }

// tableAttr names the table as the measurements do.
func tableAttr(t []string) attribute.KeyValue { return AttrTable.String(strings.Join(t, ".")) }

func attrs(kv ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(kv...))
}

// OnNewWriter starts reporting the writer's gauges.
func (h *Hooks) OnNewWriter(w *iceberg.Writer) {
	set := attribute.NewSet(tableAttr(w.Table().Identifier()), AttrWriter.String(w.ID()))
	h.mu.Lock()
	defer h.mu.Unlock()
	h.writers[w] = set
}

// OnWriterClosed stops reporting the writer's gauges and ends the span of a transaction it left unfinished.
func (h *Hooks) OnWriterClosed(w *iceberg.Writer) {
	h.mu.Lock()
	delete(h.writers, w)
	left := h.pending[w.ID()]
	delete(h.pending, w.ID())
	h.mu.Unlock()
	h.unfinished(w.Table().Identifier(), w.ID(), left)
}

// OnBatchSealed counts the batch and its rows.
func (h *Hooks) OnBatchSealed(ev iceberg.BatchSealed) {
	ctx, a := context.Background(), attrs(tableAttr(ev.Table))
	h.m.batches.Add(ctx, 1, a)
	h.m.rowsSealed.Add(ctx, ev.Rows, a)
	h.m.batchRows.Record(ctx, ev.Rows, a)
	h.m.batchOpen.Record(ctx, ev.Open.Seconds(), a)
}

// OnFileWritten counts the file and its bytes, and the batch's encoding once per batch.
func (h *Hooks) OnFileWritten(ev iceberg.FileWritten) {
	ctx := context.Background()
	content := "data"
	if ev.Deletes {
		content = "deletes"
	}
	a := attrs(tableAttr(ev.Table), AttrContent.String(content))
	h.m.files.Add(ctx, 1, a)
	h.m.bytesWritten.Add(ctx, ev.Bytes, a)
	h.m.fileSize.Record(ctx, ev.Bytes, a)
	if ev.Index == 0 {
		h.m.encode.Record(ctx, ev.Encode.Seconds(), attrs(tableAttr(ev.Table)))
	}
}

// outcome classifies an attempt (AttrOutcome).
func outcome(a iceberg.CommitAttempt) string {
	switch {
	case !a.Sent:
		return OutcomeUnsent
	case a.Err == nil:
		return OutcomeApplied
	case a.Cause != "":
		return OutcomeConflict
	}
	return OutcomeError
}

// OnCommitAttempt counts the attempt and keeps it for its transaction's span.
func (h *Hooks) OnCommitAttempt(ev iceberg.CommitAttempt) {
	ctx := context.Background()
	a := attrs(tableAttr(ev.Table), AttrKind.String(string(ev.Kind)), AttrOutcome.String(outcome(ev)))
	h.m.attempts.Add(ctx, 1, a)
	h.m.attemptDuration.Record(ctx, ev.Duration.Seconds(), a)
	h.mu.Lock()
	var left []iceberg.CommitAttempt
	if ev.Attempt == 1 {
		// A writer commits one transaction at a time: a first attempt starts the next one, and whatever is
		// still pending belongs to one that ended without an event of its own (it gave up).
		left = h.pending[ev.WriterID]
		h.pending[ev.WriterID] = nil
	}
	h.pending[ev.WriterID] = append(h.pending[ev.WriterID], ev)
	var done []iceberg.CommitAttempt
	if ev.Sent && ev.Err == nil && !endsWithEvent(ev.Kind) {
		done = h.pending[ev.WriterID]
		delete(h.pending, ev.WriterID)
	}
	h.mu.Unlock()
	h.unfinished(ev.Table, ev.WriterID, left)
	if done != nil {
		start := done[0].Start
		h.span(spanName(ev.Kind), start, ev.Start.Add(ev.Duration), nil, done,
			tableAttr(ev.Table), AttrWriter.String(ev.WriterID), AttrKind.String(string(ev.Kind)))
	}
}

// endsWithEvent reports whether a transaction of kind k ends with an event of its own, which makes its span.
func endsWithEvent(k iceberg.CommitKind) bool {
	return k == iceberg.KindRun || k == iceberg.KindCompaction || k == iceberg.KindExpiry
}

// take returns the pending attempts of the writer's transaction of kind k, and forgets them.
func (h *Hooks) take(writer string, k iceberg.CommitKind) []iceberg.CommitAttempt {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.pending[writer]
	if len(p) == 0 || p[0].Kind != k {
		return nil
	}
	delete(h.pending, writer)
	return p
}

// OnCommitted records the commit and its span, with a child span per attempt.
func (h *Hooks) OnCommitted(ci iceberg.CommitInfo) {
	ctx, a := context.Background(), attrs(tableAttr(ci.Table))
	h.m.commits.Add(ctx, 1, a)
	h.m.rowsCommitted.Add(ctx, ci.Rows, a)
	h.m.bytesCommitted.Add(ctx, ci.FileBytes, a)
	h.m.commitDuration.Record(ctx, ci.Duration.Seconds(), a)
	h.m.commitAttempts.Record(ctx, int64(ci.Attempts), a)
	h.span("iceberg.commit", ci.CommitTime.Add(-ci.Duration), ci.CommitTime, nil, h.take(ci.WriterID, iceberg.KindRun),
		tableAttr(ci.Table), AttrWriter.String(ci.WriterID), AttrKind.String(string(iceberg.KindRun)),
		AttrSnapshotID.Int64(ci.SnapshotID), attribute.Int64("iceberg.rows", ci.Rows),
		attribute.Int("iceberg.files", ci.Files), attribute.Int64("iceberg.file_bytes", ci.FileBytes),
		attribute.Int("iceberg.attempts", ci.Attempts), attribute.Int64("iceberg.seq.first", ci.FirstSeq),
		attribute.Int64("iceberg.seq.last", ci.LastSeq))
}

// OnConflict counts the conflict by its cause.
func (h *Hooks) OnConflict(ev iceberg.Conflict) {
	h.m.conflicts.Add(context.Background(), 1, attrs(tableAttr(ev.Table), AttrKind.String(string(ev.Kind)),
		AttrCause.String(string(ev.Cause))))
}

// OnRetry counts the retry by the cause of the failure before it ("error" when it was no conflict).
func (h *Hooks) OnRetry(ev iceberg.Retry) {
	cause := string(ev.Cause)
	if cause == "" {
		cause = "error"
	}
	h.m.retries.Add(context.Background(), 1, attrs(tableAttr(ev.Table), AttrKind.String(string(ev.Kind)),
		AttrCause.String(cause)))
	h.m.retryWait.Record(context.Background(), ev.Wait.Seconds(), attrs(tableAttr(ev.Table)))
}

// OnFenced counts the writer stopped by a takeover of its ID.
func (h *Hooks) OnFenced(ev iceberg.Fenced) {
	h.m.fenced.Add(context.Background(), 1, attrs(tableAttr(ev.Table)))
}

// OnCompaction counts the compaction, its files and time, and records its span.
func (h *Hooks) OnCompaction(ev iceberg.Compaction) {
	ctx := context.Background()
	out := OutcomeApplied
	if ev.Err != nil {
		out = OutcomeError
	}
	a := attrs(tableAttr(ev.Table), AttrAutomatic.Bool(ev.Automatic), AttrOutcome.String(out))
	h.m.compactions.Add(ctx, 1, a)
	h.m.compactionDuration.Record(ctx, ev.Duration.Seconds(), a)
	h.m.filesRewritten.Add(ctx, int64(ev.Result.RewrittenDataFiles), attrs(tableAttr(ev.Table)))
	end := time.Now()
	h.span("iceberg.compaction", end.Add(-ev.Duration), end, ev.Err, h.take(ev.WriterID, iceberg.KindCompaction),
		tableAttr(ev.Table), AttrWriter.String(ev.WriterID), AttrAutomatic.Bool(ev.Automatic),
		AttrSnapshotID.Int64(ev.Result.SnapshotID), attribute.Int("iceberg.files.rewritten", ev.Result.RewrittenDataFiles))
}

// OnExpiry counts the snapshots expired and records the expiry's span.
func (h *Hooks) OnExpiry(ev iceberg.Expiry) {
	ctx := context.Background()
	h.m.snapshotsExpired.Add(ctx, int64(ev.Expired), attrs(tableAttr(ev.Table)))
	h.m.expiryDuration.Record(ctx, ev.Duration.Seconds(), attrs(tableAttr(ev.Table)))
	end := time.Now()
	h.span("iceberg.expiry", end.Add(-ev.Duration), end, ev.Err, h.take(ev.WriterID, iceberg.KindExpiry),
		tableAttr(ev.Table), AttrWriter.String(ev.WriterID), attribute.Int("iceberg.snapshots.expired", ev.Expired))
}

// OnBackpressureWait records how long a call waited for room, by the limit it waited on.
func (h *Hooks) OnBackpressureWait(ev iceberg.BackpressureWait) {
	h.m.backpressure.Record(context.Background(), ev.Duration.Seconds(),
		attrs(tableAttr(ev.Table), AttrReason.String(string(ev.Reason))))
}

// spanName is the span of a transaction of kind k.
func spanName(k iceberg.CommitKind) string {
	if k == iceberg.KindRun {
		return "iceberg.commit"
	}
	return "iceberg." + string(k)
}

// unfinished records the span of a transaction that ended without applying (it gave up, or its writer
// stopped), from its attempts.
func (h *Hooks) unfinished(table []string, writer string, attempts []iceberg.CommitAttempt) {
	if len(attempts) == 0 {
		return
	}
	first, last := attempts[0], attempts[len(attempts)-1]
	err := last.Err
	if err == nil {
		err = errors.New("the transaction ended without a commit")
	}
	h.span(spanName(first.Kind), first.Start, last.Start.Add(last.Duration), err, attempts,
		tableAttr(table), AttrWriter.String(writer), AttrKind.String(string(first.Kind)))
}

// span records a transaction's span from start to end (an error status when err is set) with a child span for
// each attempt.
func (h *Hooks) span(name string, start, end time.Time, err error, attempts []iceberg.CommitAttempt, kv ...attribute.KeyValue) {
	if len(attempts) > 0 && attempts[0].Start.Before(start) {
		start = attempts[0].Start
	}
	ctx, sp := h.tracer.Start(context.Background(), name, trace.WithTimestamp(start), trace.WithAttributes(kv...),
		trace.WithSpanKind(trace.SpanKindInternal))
	for _, a := range attempts {
		_, as := h.tracer.Start(ctx, "iceberg.commit.attempt", trace.WithTimestamp(a.Start),
			trace.WithAttributes(attribute.Int("iceberg.attempt", a.Attempt), AttrKind.String(string(a.Kind)),
				AttrOutcome.String(outcome(a))))
		if a.Err != nil {
			if a.Cause != "" {
				as.SetAttributes(AttrCause.String(string(a.Cause)))
			}
			as.RecordError(a.Err)
			as.SetStatus(codes.Error, a.Err.Error())
		}
		as.End(trace.WithTimestamp(a.Start.Add(a.Duration)))
	}
	if err != nil {
		sp.RecordError(err)
		sp.SetStatus(codes.Error, err.Error())
	}
	sp.End(trace.WithTimestamp(end))
}

// observe reports the gauges of every writer open: what its Stats and PositionLags say now.
func (h *Hooks) observe(_ context.Context, o metric.Observer) error {
	h.mu.Lock()
	ws := make(map[*iceberg.Writer]attribute.Set, len(h.writers))
	for w, set := range h.writers {
		ws[w] = set
	}
	h.mu.Unlock()
	now := time.Now()
	for w, set := range ws {
		st := w.Stats()
		a := metric.WithAttributeSet(set)
		o.ObserveInt64(h.m.queue, int64(st.UncommittedBatches), a)
		o.ObserveInt64(h.m.uncommittedRows, st.UncommittedRows, a)
		o.ObserveInt64(h.m.bufferedRows, st.BufferedRows, a)
		o.ObserveInt64(h.m.memory, st.BufferedBytes, a)
		var fresh float64
		if !st.OldestUncommitted.IsZero() {
			fresh = now.Sub(st.OldestUncommitted).Seconds()
		}
		o.ObserveFloat64(h.m.freshness, fresh, a)
		if !st.LastCommit.IsZero() {
			o.ObserveFloat64(h.m.lastCommitAge, now.Sub(st.LastCommit).Seconds(), a)
		}
		for _, l := range w.PositionLags() {
			pa := metric.WithAttributeSet(attribute.NewSet(append(set.ToSlice(), AttrPartition.String(l.Partition))...))
			var lag float64
			if !l.Since.IsZero() {
				lag = now.Sub(l.Since).Seconds()
			}
			o.ObserveFloat64(h.m.positionLag, lag, pa)
			if n, ok := offsetLag(l); ok {
				o.ObserveInt64(h.m.positionOffsets, n, pa)
			}
		}
	}
	return nil
}

// offsetLag is how many positions the committed one trails the accepted one, when both are integers (Kafka
// offsets, sequence numbers) and one was committed.
func offsetLag(l iceberg.PositionLag) (int64, bool) {
	acc, err1 := strconv.ParseInt(l.Accepted, 10, 64)
	com, err2 := strconv.ParseInt(l.Committed, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return acc - com, true
}
