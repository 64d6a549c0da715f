package iceberg

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
	"path"
	"regexp"
	"sync/atomic"

	"github.com/google/uuid"
)

// fileNamer gives the files a writer with a stable ID writes (data files, deletion vectors) a name that says
// whose they are, so that a later writer with the same ID can recognise the ones it left uncommitted
// (sweepOrphans). iceberg-go names a data file {partition}-{task}-{write UUID}-{count}.parquet and takes the
// write UUID as an option (table.WithWriteUUID); the namer makes that UUID a custom (version 8, RFC 9562) UUID
// that carries:
//
//   - the owner: 48 bits of a SHA-256 of the table's UUID and the writer ID. Hex in a path, safe whatever the ID
//     holds; the table's UUID makes a file of another table never look like this one's (data paths may be
//     shared), and the version nibble 8 keeps the random version-4 UUIDs of every other writer out.
//   - the epoch the writer holds (32 bits): files of the current epoch are never candidates, and an earlier
//     epoch is fenced (fence.go), so its uncommitted files can never be committed.
//   - a counter (42 bits) that makes each call's UUID unique: iceberg-go restarts its task and file counts at
//     every call, and one process holds an (ID, epoch) pair, so the counter alone keeps names apart.
//
// Layout, big-endian: owner (48) | version 8 (4) | epoch's high 12 bits | variant 10 (2) | epoch's low 20 bits |
// counter (42). A nil namer (random writer IDs, or an epoch past 32 bits) hands out random UUIDs, as
// iceberg-go would: such files are only ever removed by RemoveOrphanFiles.
type fileNamer struct {
	owner uint64 // 48 bits
	epoch uint32
	count atomic.Uint64
}

// newFileNamer returns the namer of a stable writer ID holding epoch on the table with UUID tableUUID, nil when
// the epoch does not fit.
func newFileNamer(tableUUID uuid.UUID, writerID string, epoch int64) *fileNamer {
	if epoch <= 0 || epoch > math.MaxUint32 {
		return nil
	}
	return &fileNamer{owner: fileOwner(tableUUID, writerID), epoch: uint32(epoch)}
}

// fileOwner is the 48-bit owner mark of a writer ID's files on a table.
func fileOwner(tableUUID uuid.UUID, writerID string) uint64 {
	h := sha256.New()
	h.Write([]byte("icewriter file owner\x00"))
	h.Write(tableUUID[:])
	h.Write([]byte(writerID))
	return binary.BigEndian.Uint64(h.Sum(nil)) >> 16
}

// next returns the write UUID of the next file-writing call.
func (n *fileNamer) next() uuid.UUID {
	if n == nil {
		return uuid.New()
	}
	return markUUID(n.owner, n.epoch, n.count.Add(1)&(1<<42-1))
}

func markUUID(owner uint64, epoch uint32, count uint64) uuid.UUID {
	hi := owner<<16 | 0x8<<12 | uint64(epoch>>20)
	lo := 0b10<<62 | uint64(epoch&(1<<20-1))<<42 | count
	var u uuid.UUID
	binary.BigEndian.PutUint64(u[:8], hi)
	binary.BigEndian.PutUint64(u[8:], lo)
	return u
}

// markedUUID matches a version-8 UUID (lower-case hex, as uuid.UUID.String and iceberg-go spell it).
var markedUUID = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}`)

// earlier reports whether the file at location was written by the namer's writer ID in an earlier epoch than
// the namer's: its base name carries a mark with the namer's owner and a smaller epoch.
func (n *fileNamer) earlier(location string) bool {
	if n == nil {
		return false
	}
	for _, s := range markedUUID.FindAllString(path.Base(location), -1) {
		u, err := uuid.Parse(s)
		if err != nil {
			continue
		}
		hi, lo := binary.BigEndian.Uint64(u[:8]), binary.BigEndian.Uint64(u[8:])
		epoch := uint32(hi&(1<<12-1))<<20 | uint32(lo>>42&(1<<20-1))
		if hi>>16 == n.owner && epoch < n.epoch {
			return true
		}
	}
	return false
}
