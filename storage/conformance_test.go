package storage_test

import (
	"testing"

	"github.com/icewriter/iceberg/storage/storagetest"
)

func TestFileConformance(t *testing.T) {
	storagetest.Run(t, storagetest.Config{Root: "file://" + t.TempDir(), LargeSize: 4 << 20})
}

func TestMemConformance(t *testing.T) {
	storagetest.Run(t, storagetest.Config{Root: "mem://conformance/prefix", LargeSize: 4 << 20})
}
