package iceberg

import (
	"runtime"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Measuring memory: an allocator that counts what a writer allocates, and the live heap.

// countingAllocator is a writer's allocator (options.mem) that counts the bytes allocated through it, freed or
// not, over a checked allocator that tells what is still held.
type countingAllocator struct {
	*memory.CheckedAllocator
	allocated atomic.Int64
}

func newCountingAllocator() *countingAllocator {
	return &countingAllocator{CheckedAllocator: memory.NewCheckedAllocator(memory.NewGoAllocator())}
}

func (a *countingAllocator) Allocate(size int) []byte {
	a.allocated.Add(int64(size))
	return a.CheckedAllocator.Allocate(size)
}

func (a *countingAllocator) Reallocate(size int, b []byte) []byte {
	a.allocated.Add(int64(size))
	return a.CheckedAllocator.Reallocate(size, b)
}

// heapInUse is the live heap after two collections.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
