// Package nophook is a hook of every kind that does nothing: what the writer's hooks cost by themselves, for the
// benchmarks of the root module and of the otel module.
package nophook

import iceberg "github.com/icewriter/iceberg"

// Hook implements every iceberg.Hook* interface and does nothing.
type Hook struct{}

func (Hook) OnNewWriter(*iceberg.Writer)                 {}
func (Hook) OnWriterClosed(*iceberg.Writer)              {}
func (Hook) OnBatchSealed(iceberg.BatchSealed)           {}
func (Hook) OnFileWritten(iceberg.FileWritten)           {}
func (Hook) OnCommitAttempt(iceberg.CommitAttempt)       {}
func (Hook) OnCommitted(iceberg.CommitInfo)              {}
func (Hook) OnConflict(iceberg.Conflict)                 {}
func (Hook) OnRetry(iceberg.Retry)                       {}
func (Hook) OnFenced(iceberg.Fenced)                     {}
func (Hook) OnCompaction(iceberg.Compaction)             {}
func (Hook) OnExpiry(iceberg.Expiry)                     {}
func (Hook) OnBackpressureWait(iceberg.BackpressureWait) {}
