package pipeline

import (
	"time"
)

// SealPolicy is the pipeline's seal policy: rows, bytes, interval since the first row (0: none).
type SealPolicy struct {
	Rows, Bytes int64
	Interval    time.Duration
}

// SetPolicy replaces the seal policy and returns the one it replaced. The open buffer is sealed at once when the
// new policy would have sealed it; it gets an interval timer when it has none.
func (p *Pipeline[B]) SetPolicy(sp SealPolicy) SealPolicy {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := SealPolicy{Rows: p.cfg.FlushRows, Bytes: p.cfg.FlushBytes, Interval: p.cfg.FlushInterval}
	p.cfg.FlushRows, p.cfg.FlushBytes, p.cfg.FlushInterval = sp.Rows, sp.Bytes, sp.Interval
	if none(p.buf.open) || p.life.closed {
		return old
	}
	if p.buf.open.Head().Rows >= sp.Rows || p.buf.open.Head().Bytes >= sp.Bytes {
		p.sealLocked()
	} else if p.buf.timer == nil {
		p.startTimerLocked()
	}
	return old
}

// SetCarry turns bulk files across batches on or off. The caller has flushed before turning it
// off, so no file is open.
func (p *Pipeline[B]) SetCarry(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bulk.carry = on
}

// Queued reports whether the pipeline holds sealed batches not yet committed.
func (p *Pipeline[B]) Queued() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue) > 0
}
