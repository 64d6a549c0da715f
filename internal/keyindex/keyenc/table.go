package keyenc

// TableSize is the number of slots of an open-addressing table for up to n entries: a power of two at least
// twice n, so that probes stay short.
func TableSize(n int) int {
	size := 8
	for size < 2*n {
		size <<= 1
	}
	return size
}
