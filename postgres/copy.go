package postgres

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

var copySignature = []byte("PGCOPY\n\xff\r\n\x00")

// copyParser parses COPY ... TO STDOUT (FORMAT binary) as pgconn.CopyTo writes it (one io.Writer call per
// CopyData message, which need not hold whole rows): each complete row's values go to row, which must not keep
// the slices it gets.
type copyParser struct {
	row    func(vals [][]byte) error
	buf    []byte
	header bool
	done   bool
	vals   [][]byte
}

func (p *copyParser) Write(data []byte) (int, error) {
	if p.header && len(p.buf) == 0 {
		// The common case, a message of whole rows (Postgres sends one row per CopyData message): the rows are
		// parsed where they are, and only a partial row's bytes are kept for the next message.
		off, err := p.parseRows(data)
		if err != nil {
			return 0, err
		}
		p.buf = append(p.buf, data[off:]...)
		return len(data), nil
	}
	p.buf = append(p.buf, data...)
	off := 0
	if !p.header {
		if len(p.buf) < 19 {
			return len(data), nil
		}
		if !bytes.Equal(p.buf[:11], copySignature) {
			return 0, fmt.Errorf("postgres: COPY binary: bad signature")
		}
		ext := int(binary.BigEndian.Uint32(p.buf[15:]))
		if len(p.buf) < 19+ext {
			return len(data), nil
		}
		off, p.header = 19+ext, true
	}
	n, err := p.parseRows(p.buf[off:])
	if err != nil {
		return 0, err
	}
	off += n
	p.buf = p.buf[:copy(p.buf, p.buf[off:])]
	return len(data), nil
}

// parseRows parses the whole rows at the start of b (up to the trailer) and returns the bytes they took.
func (p *copyParser) parseRows(b []byte) (int, error) {
	off := 0
	for !p.done {
		n, err := p.parseRow(b[off:])
		if err != nil {
			return 0, err
		}
		if n == 0 {
			break
		}
		off += n
	}
	return off, nil
}

// parseRow parses one row at the start of b and hands it to row; 0 means b holds no whole row yet.
func (p *copyParser) parseRow(b []byte) (int, error) {
	if len(b) < 2 {
		return 0, nil
	}
	nf := int(int16(binary.BigEndian.Uint16(b)))
	if nf == -1 {
		p.done = true
		return 2, nil
	}
	off := 2
	p.vals = p.vals[:0]
	for range nf {
		if len(b) < off+4 {
			return 0, nil
		}
		l := int(int32(binary.BigEndian.Uint32(b[off:])))
		off += 4
		if l < 0 {
			p.vals = append(p.vals, nil)
			continue
		}
		if len(b) < off+l {
			return 0, nil
		}
		p.vals = append(p.vals, b[off:off+l:off+l])
		off += l
	}
	if err := p.row(p.vals); err != nil {
		return 0, err
	}
	return off, nil
}

// finish reports an error when the stream ended before its trailer.
func (p *copyParser) finish() error {
	if !p.done || len(p.buf) != 0 {
		return fmt.Errorf("postgres: COPY binary: stream ended early")
	}
	return nil
}
