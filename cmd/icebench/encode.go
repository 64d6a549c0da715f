package main

import (
	"io"
	"runtime"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// encodeRate is DESIGN.md's encode baseline: one pqarrow FileWriter with zstd and otherwise default properties,
// one goroutine, writing the same batches to io.Discard. It is the ceiling of a sink that encodes on one core
// and the unit in which the other rates read ("x encode").
func encodeRate(procs int, batches []arrow.RecordBatch) (float64, error) {
	defer setProcs(procs)()
	runtime.GC()
	start := time.Now()
	fw, err := pqarrow.NewFileWriter(seedSchema, io.Discard,
		parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd)), pqarrow.DefaultWriterProps())
	if err != nil {
		return 0, err
	}
	for _, r := range batches {
		if err := fw.WriteBuffered(r); err != nil {
			return 0, err
		}
	}
	if err := fw.Close(); err != nil {
		return 0, err
	}
	return float64(totalRows(batches)) / time.Since(start).Seconds(), nil
}
