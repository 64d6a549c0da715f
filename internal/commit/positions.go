package commit

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync"

	ice "github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/puffin"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
)

// Side files of source positions: the merged map of every position on a table, gzipped JSON in the one blob of
// a Puffin file under the table's metadata location, named by the snapshot summary of each commit that changed
// positions (the root's positions.go has the design).

const (
	positionsFilePrefix  = "icewriter-positions-"
	positionsFileFormat  = "icewriter-positions"
	positionsFileVersion = 1
	// maxPositionsFileBytes bounds what a side file may inflate to: 10,000 partitions with keys and positions at
	// their caps are 20 MiB; anything larger is not a file this writer wrote.
	maxPositionsFileBytes = 256 << 20
)

// positionsFile is a side file's content.
type positionsFile struct {
	Format    string            `json:"format"`
	Version   int               `json:"version"`
	Positions map[string]string `json:"positions"`
}

// positionsBlobType is the type of the Puffin blob that holds a side file's positions.
const positionsBlobType puffin.BlobType = "icewriter-positions-v1"

// ReadPositionsFile reads and parses a side file: a Puffin file whose blob holds the gzipped JSON, or (written
// before side files were Puffin files) the gzipped or plain JSON itself. Errors name the file.
func ReadPositionsFile(ctx context.Context, tbl *table.Table, path string) (map[string]string, error) {
	fail := func(err error) (map[string]string, error) {
		return nil, fmt.Errorf("iceberg: read positions file %s: %w", path, err)
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return fail(err)
	}
	f, err := fs.Open(path)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxPositionsFileBytes+1))
	if err != nil {
		return fail(err)
	}
	if bytes.HasPrefix(raw, []byte("PFA1")) {
		if raw, err = positionsBlob(raw); err != nil {
			return fail(err)
		}
	}
	var r io.Reader = bytes.NewReader(raw)
	if len(raw) >= 2 && raw[0] == 0x1f && raw[1] == 0x8b {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return fail(err)
		}
		defer zr.Close()
		r = zr
	}
	data, err := io.ReadAll(io.LimitReader(r, maxPositionsFileBytes+1))
	if err != nil {
		return fail(err)
	}
	if len(data) > maxPositionsFileBytes {
		return fail(fmt.Errorf("larger than %d bytes", maxPositionsFileBytes))
	}
	var pf positionsFile
	if err := json.Unmarshal(data, &pf); err != nil {
		return fail(err)
	}
	if pf.Format != positionsFileFormat || pf.Version != positionsFileVersion {
		return fail(fmt.Errorf("format %q version %d, want %q version %d", pf.Format, pf.Version,
			positionsFileFormat, positionsFileVersion))
	}
	if pf.Positions == nil {
		pf.Positions = map[string]string{}
	}
	return pf.Positions, nil
}

// positionsBlob returns the positions blob of a Puffin side file.
func positionsBlob(file []byte) ([]byte, error) {
	pr, err := puffin.NewReader(bytes.NewReader(file))
	if err != nil {
		return nil, err
	}
	for _, b := range pr.Blobs() {
		if b.Type == positionsBlobType {
			return pr.ReadBlobByMetadata(b)
		}
	}
	return nil, fmt.Errorf("no %s blob", positionsBlobType)
}

// WritePositionsFile writes positions as a new side file under the table's metadata location and returns its
// path. The path is returned with an error too once the upload began: the file may exist.
//
// The file is a Puffin file (Iceberg's container for blobs beside a table's metadata) holding one blob, the
// gzipped JSON: stores that accept only the Iceberg layout in a table's folder (SeaweedFS's table buckets take
// metadata/*.metadata.json, *.avro, *.stats and *.puffin, nothing else) refused the plain .json.gz.
func WritePositionsFile(ctx context.Context, tbl *table.Table, positions map[string]string) (string, error) {
	lp, err := tbl.LocationProvider()
	if err != nil {
		return "", fmt.Errorf("iceberg: write positions file: %w", err)
	}
	path := lp.NewMetadataLocation(positionsFilePrefix + uuid.NewString() + ".puffin")
	fail := func(err error) (string, error) {
		return "", fmt.Errorf("iceberg: write positions file %s: %w", path, err)
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return fail(err)
	}
	wfs, ok := fs.(iceio.WriteFileIO)
	if !ok {
		return fail(fmt.Errorf("the table's FileIO (%T) cannot write files", fs))
	}
	var blob bytes.Buffer
	zw := gzip.NewWriter(&blob)
	if err := json.NewEncoder(zw).Encode(positionsFile{Format: positionsFileFormat, Version: positionsFileVersion,
		Positions: positions}); err != nil {
		return fail(err)
	}
	if err := zw.Close(); err != nil {
		return fail(err)
	}
	var buf bytes.Buffer
	pw, err := puffin.NewWriter(&buf)
	if err != nil {
		return fail(err)
	}
	if err := pw.SetCreatedBy("icewriter"); err != nil {
		return fail(err)
	}
	// Not a statistic of a snapshot (-1) nor of any column: the blob is ours alone.
	if _, err := pw.AddBlob(puffin.BlobMetadataInput{Type: positionsBlobType, SnapshotID: -1, SequenceNumber: -1,
		Fields: []int32{}}, blob.Bytes()); err != nil {
		return fail(err)
	}
	if err := pw.Finish(); err != nil {
		return fail(err)
	}
	if err := wfs.WriteFile(path, buf.Bytes()); err != nil {
		return path, fmt.Errorf("iceberg: write positions file %s: %w", path, err)
	}
	return path, nil
}

// PositionsCache keeps the side files read or written last, parsed, by path. A side file never changes once
// written, so entries never go stale: a writer's next commit builds on the file its last one wrote without
// downloading it. It holds no attempt's state, so one cache serves concurrent commits; its maps are never
// changed (callers clone). A nil cache caches nothing.
type PositionsCache struct {
	mu    sync.Mutex
	files map[string]map[string]string
	order []string // oldest first
}

// positionsCacheFiles bounds the cache: a writer needs the file its last commit wrote and, after a conflict,
// the one the other writer wrote.
const positionsCacheFiles = 4

// NewPositionsCache makes an empty PositionsCache.
func NewPositionsCache() *PositionsCache {
	return &PositionsCache{files: map[string]map[string]string{}}
}

// Read returns the parsed side file at path, from the cache or from storage. The map must not be changed.
func (c *PositionsCache) Read(ctx context.Context, tbl *table.Table, path string) (map[string]string, error) {
	if c != nil {
		c.mu.Lock()
		m, ok := c.files[path]
		c.mu.Unlock()
		if ok {
			return m, nil
		}
	}
	m, err := ReadPositionsFile(ctx, tbl, path)
	if err == nil {
		c.Put(path, m)
	}
	return m, err
}

// Put caches the parsed side file at path; m must not be changed afterwards.
func (c *PositionsCache) Put(path string, m map[string]string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.files[path]; ok {
		return
	}
	c.files[path] = m
	c.order = append(c.order, path)
	if len(c.order) > positionsCacheFiles {
		delete(c.files, c.order[0])
		c.order = c.order[1:]
	}
}

// The snapshot summary key naming a commit's side file, and the table property prefix (+ branch) of its mirror.
const (
	SummaryPositions    = "icewriter.positions"
	PositionsPropPrefix = "icewriter.positions."
)

// PositionsMirror names a side file and the snapshot that committed it: the table property mirror, and what
// FindPositions returns.
type PositionsMirror struct {
	Path       string `json:"path"`
	SnapshotID int64  `json:"snapshot-id"`
	SeqNumber  int64  `json:"sequence-number"`
}

// FindPositions finds the side file holding the branch's positions (see the root's positions.go); false: none.
func FindPositions(meta table.Metadata, branch string) (PositionsMirror, bool) {
	s, oldest := NewestOnAncestry(meta, branch, func(s *table.Snapshot) bool {
		p, _ := SummaryProp(s, SummaryPositions)
		return p != ""
	})
	if s != nil {
		p, _ := SummaryProp(s, SummaryPositions)
		return PositionsMirror{Path: p, SnapshotID: s.SnapshotID, SeqNumber: s.SequenceNumber}, true
	}
	v, ok := meta.Properties()[PositionsPropPrefix+branch]
	if !ok {
		return PositionsMirror{}, false
	}
	var m PositionsMirror
	if json.Unmarshal([]byte(v), &m) != nil || m.Path == "" || !MirrorTrusted(meta, m.SnapshotID, m.SeqNumber, oldest) {
		return PositionsMirror{}, false
	}
	return m, true
}

// RefreshPositionsMirror re-derives the branch's positions mirror from its ancestry, in a transaction that is
// about to expire snapshots: the mirror must name the positions that are still on the branch when their
// snapshot goes, not ones a rollback left behind.
func RefreshPositionsMirror(tx *table.Transaction, meta table.Metadata, branch string) error {
	key := PositionsPropPrefix + branch
	cur, has := meta.Properties()[key]
	m, ok := FindPositions(meta, branch)
	switch {
	case ok && MustJSON(m) != cur:
		return tx.SetProperties(ice.Properties{key: MustJSON(m)})
	case !ok && has:
		return tx.RemoveProperties([]string{key})
	}
	return nil
}

// TablePositions reads the branch's positions on tbl (an empty map when it has none), through cache (nil: none).
// The map is the caller's.
func TablePositions(ctx context.Context, tbl *table.Table, branch string, cache *PositionsCache) (map[string]string, error) {
	ref, ok := FindPositions(tbl.Metadata(), branch)
	if !ok {
		return map[string]string{}, nil
	}
	m, err := cache.Read(ctx, tbl, ref.Path)
	if err != nil {
		return nil, err
	}
	return maps.Clone(m), nil
}

// ExpiredPositionFiles are the side files that expired snapshots named and that neither a retained snapshot
// nor a positions mirror of post names: nothing can read them any more.
func ExpiredPositionFiles(post table.Metadata, expired []*table.Snapshot) []string {
	live := map[string]bool{}
	for _, s := range post.Snapshots() {
		if p, _ := SummaryProp(&s, SummaryPositions); p != "" {
			live[p] = true
		}
	}
	for k, v := range post.Properties() {
		if strings.HasPrefix(k, PositionsPropPrefix) {
			var m PositionsMirror
			if json.Unmarshal([]byte(v), &m) == nil {
				live[m.Path] = true
			}
		}
	}
	var drop []string
	for _, s := range expired {
		if p, _ := SummaryProp(s, SummaryPositions); p != "" && !live[p] {
			drop = append(drop, p)
			live[p] = true // once
		}
	}
	return drop
}
