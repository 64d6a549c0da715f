package keyindex

import (
	ice "github.com/apache/iceberg-go"
	"github.com/icewriter/iceberg/internal/keyindex/keyenc"
)

// FileKeys are the keys of a data file the writer wrote, in row order.
type FileKeys struct {
	DF   ice.DataFile
	Keys keyenc.List
}
