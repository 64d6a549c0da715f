package storage

import (
	iceio "github.com/apache/iceberg-go/io"
	"gocloud.dev/blob"
)

// UploadOptions returns the upload options a file system of this package opens writers with.
func UploadOptions(fsys iceio.IO) *blob.WriterOptions {
	if f, ok := fsys.(*fileIO); ok {
		return f.wopts
	}
	return nil
}
