package kafka

import "context"

// Crash ends the member as a killed process would (see crash).
func (s *Sink) Crash(ctx context.Context) { s.crash(ctx) }

// ErrCrashed is what Run returns after Crash.
var ErrCrashed = errCrashed
