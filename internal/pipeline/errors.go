package pipeline

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/icewriter/iceberg/internal/commit"
)

// The errors the pipeline returns, public at the root under the same names (see there).
var (
	ErrClosed             = errors.New("iceberg: writer closed")
	ErrPositionBackwards  = errors.New("iceberg: source position goes backwards")
	ErrPartitionUncovered = errors.New("iceberg: rows of the partition were sealed without a checkpoint")
)

// checkPositionOrder returns ErrPositionBackwards, naming the partitions in order, for the positions that come
// before their partition's last known one (last) by order.
func checkPositionOrder(order func(partition, a, b string) (int, bool), positions, last map[string]string) error {
	var errs []error
	for _, p := range slices.Sorted(maps.Keys(positions)) {
		prev, ok := last[p]
		if !ok {
			continue
		}
		if c, ok := order(p, positions[p], prev); ok && c < 0 {
			errs = append(errs, fmt.Errorf("%w: partition %s: position %s comes before %s, the partition's last "+
				"position in this writer (checkpointed or resumed); checkpoint positions in source order, resume "+
				"the partition (Source.Resume) to start it over from the table's position, or set WithPositionOrder "+
				"if these positions do not order as decimal numbers", ErrPositionBackwards, commit.QuoteShort(p),
				commit.QuoteShort(positions[p]), commit.QuoteShort(prev)))
		}
	}
	return errors.Join(errs...)
}
