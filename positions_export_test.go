package iceberg

import (
	"maps"
	"time"
)

// MarkPositions records source positions on the writer's open buffer, as the pipeline's public Source
// checkpoint will (batch.positions, newest per partition): they commit with the buffer's rows, or alone in an
// empty snapshot when the buffer holds none. A test stand-in until that API lands; a buffer it opens starts no
// interval timer (tests seal it with Flush or Close).
func MarkPositions(w *Writer, positions map[string]string) error {
	for k, v := range positions {
		if err := checkPosition(k, v); err != nil {
			return err
		}
	}
	p := w.pipe
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.usableLocked(); err != nil {
		return err
	}
	if p.open == nil {
		p.open = &batch{firstAt: time.Now()}
	}
	if p.open.positions == nil {
		p.open.positions = map[string]string{}
	}
	maps.Copy(p.open.positions, positions)
	return nil
}
