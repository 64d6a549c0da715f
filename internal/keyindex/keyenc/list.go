package keyenc

import (
	"iter"
	"slices"
)

// List is the keys of a file's rows in row order (Encoder's encoding) in one buffer, without a string per row:
// key i is buf[i*width:(i+1)*width] while every key has the same width (an integer key, or any key of
// fixed-width columns without nulls), else buf[ends[i-1]:ends[i]]. The zero List is empty and ready to use.
type List struct {
	buf   []byte
	ends  []int // nil while every key is width bytes long
	width int
	n     int
}

// Len returns the keys held.
func (l *List) Len() int { return l.n }

// Key returns key i (a slice of the list's buffer: do not modify it).
func (l *List) Key(i int) []byte {
	if l.ends == nil {
		return l.buf[i*l.width : (i+1)*l.width : (i+1)*l.width]
	}
	from := 0
	if i > 0 {
		from = l.ends[i-1]
	}
	return l.buf[from:l.ends[i]:l.ends[i]]
}

// Span returns the bytes of keys from to to (exclusive).
func (l *List) Span(from, to int) int {
	if from >= to {
		return 0
	}
	if l.ends == nil {
		return (to - from) * l.width
	}
	start := 0
	if from > 0 {
		start = l.ends[from-1]
	}
	return l.ends[to-1] - start
}

// Grow makes room for n more bytes of keys.
func (l *List) Grow(n int) { l.buf = slices.Grow(l.buf, n) }

// AppendKey appends the key enc encodes for row.
func (l *List) AppendKey(enc *Encoder, row int) {
	from := len(l.buf)
	l.buf = enc.AppendKey(l.buf, row)
	l.pushed(from)
}

// Add appends a key (copied).
func (l *List) Add(key []byte) {
	from := len(l.buf)
	l.buf = append(l.buf, key...)
	l.pushed(from)
}

// pushed records the key that starts at from and ends the buffer.
func (l *List) pushed(from int) {
	w := len(l.buf) - from
	switch {
	case l.n == 0:
		l.width = w
	case l.ends == nil && w != l.width:
		// The first key of another width: every key so far ends at a multiple of the width.
		l.ends = make([]int, l.n, max(2*l.n, 16))
		for i := range l.ends {
			l.ends[i] = (i + 1) * l.width
		}
	}
	if l.ends != nil {
		l.ends = append(l.ends, len(l.buf))
	}
	l.n++
}

// All yields each key with its row position.
func (l *List) All() iter.Seq2[int, []byte] {
	return func(yield func(int, []byte) bool) {
		for i := range l.n {
			if !yield(i, l.Key(i)) {
				return
			}
		}
	}
}

// Slice returns keys [from, to) as a list of their own (sharing the buffer while every key has one width).
func (l *List) Slice(from, to int) List {
	if l.ends == nil {
		return List{buf: l.buf[from*l.width : to*l.width : to*l.width], width: l.width, n: to - from}
	}
	var out List
	for i := from; i < to; i++ {
		out.Add(l.Key(i))
	}
	return out
}
