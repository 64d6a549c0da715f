package pipeline

import (
	"context"

	"github.com/icewriter/iceberg/internal/commit"
)

// gatedLocked reports whether the pipeline commits in a router's rounds.
func (p *Pipeline[B]) gatedLocked() bool { return p.cfg.Shared != nil && p.cfg.Shared.gated }

// runCtx is the context of a run's commit: the pipeline's own, marked when the run joins a round.
func (p *Pipeline[B]) runCtx() context.Context {
	if p.gatedLocked() {
		return context.WithValue(p.ctx, commit.RoundRunKey{}, true)
	}
	return p.ctx
}

// CutForRound seals the open buffer (unless seal is false: a table in its bulk phase on a timed round keeps
// filling its batch) and returns the sequence number the round commits up to, and whether there is anything
// to commit.
func (p *Pipeline[B]) CutForRound(seal bool) (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.life.closed || p.life.failed != nil {
		return 0, false
	}
	target := p.sealedTargetLocked()
	if seal {
		target = p.flushTargetLocked()
	} else if p.bulk.carry {
		// Batches in bulk files still open commit only once a file closes: a timed round takes what may
		// commit now, instead of waiting for files the round does not close.
		n := 0
		for n < len(p.queue) && p.queue[n].Head().Staged {
			n++
		}
		target = p.committed
		if n = p.runEndLocked(n); n > 0 {
			target = p.queue[n-1].Head().Seq
		}
	}
	return target, target > p.committed
}

// WaitStaged waits until every batch up to target is encoded and uploaded, and reports whether they all are
// (false: the pipeline failed or closed meanwhile, and commits nothing more of them).
func (p *Pipeline[B]) WaitStaged(target int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		if p.life.failed != nil || p.life.closed {
			return false
		}
		ready := true
		for _, b := range p.queue {
			if b.Head().Seq <= target && !b.Head().Staged {
				ready = false
				break
			}
		}
		if ready {
			return true
		}
		_ = p.waitLocked(context.Background())
	}
}

// ReleaseTo lets the commit loop commit up to target.
func (p *Pipeline[B]) ReleaseTo(target int64) {
	p.mu.Lock()
	p.released = max(p.released, target)
	p.mu.Unlock()
	p.kickLoop()
}

// RoundDone reports whether the pipeline will commit nothing more up to target (it did, or it stopped), and
// otherwise returns the channel its next change closes.
func (p *Pipeline[B]) RoundDone(target int64) (bool, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		return true, nil
	default:
	}
	if p.committed >= target || p.life.failed != nil {
		return true, nil
	}
	return false, p.changed
}

// spanEnd returns the length of the longest prefix of q[:n] a run may take without splitting a bulk file: no
// batch in it has its rows in a file still open, and every closed file it touches ends inside it.
func spanEnd[B Batch[B]](q []B, n int) int {
	end := 0
	var until int64
	for i, b := range q[:n] {
		if b.Head().Bulk.Span != nil {
			if !b.Head().Bulk.Span.Done {
				break
			}
			until = max(until, b.Head().Bulk.Span.Until)
		}
		if until <= b.Head().Seq {
			end = i + 1
		}
	}
	return end
}
