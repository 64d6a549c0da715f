//go:build !unix

package benchpair

import "time"

// CPUTime is 0 where the process's CPU time is not read: the CPU ratios are then not reported.
func CPUTime() time.Duration { return 0 }
