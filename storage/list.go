package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"

	iceio "github.com/apache/iceberg-go/io"
	"gocloud.dev/blob"
)

// ErrNotListable is what List returns for a file system that cannot list the files under a location.
var ErrNotListable = errors.New("storage: the file system cannot list files")

// FileInfo describes one file List found.
type FileInfo struct {
	// Path is the file's location, spelled as the listed location, a slash and the rest of the file's key.
	Path    string
	Size    int64
	ModTime time.Time // the store's last-modified time: when the upload completed
}

// List calls fn for every file under location, taken as a folder (location/...; a sibling whose name merely
// starts the same, location2/..., is not under it), in no particular order, until fn returns an error. A
// location that holds no file is empty, not an error.
//
// A file system of this package lists with one flat, paginated prefix listing of its bucket on ctx (no request
// per folder). Any other file system that implements iceberg-go's io.ListableIO is walked folder by folder; one
// that does not returns an error wrapping ErrNotListable and naming its type.
func List(ctx context.Context, fsys iceio.IO, location string, fn func(FileInfo) error) error {
	location = strings.TrimSuffix(location, "/")
	switch f := fsys.(type) {
	case *fileIO:
		return f.list(ctx, location, fn)
	case iceio.ListableIO:
		return walkList(ctx, f, location, fn)
	}
	return fmt.Errorf("%w: %T", ErrNotListable, fsys)
}

func (f *fileIO) list(ctx context.Context, location string, fn func(FileInfo) error) error {
	key, err := f.key(location)
	if err != nil {
		return fmt.Errorf("storage: list %s: %w", location, err)
	}
	prefix := strings.TrimSuffix(key, "/")
	if prefix != "" {
		prefix += "/"
	}
	it := f.b.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("storage: list %s: %w", location, err)
		}
		if obj.IsDir || strings.HasSuffix(obj.Key, "/") {
			continue // a folder marker, not a file
		}
		info := FileInfo{Path: location + "/" + strings.TrimPrefix(obj.Key, prefix), Size: obj.Size, ModTime: obj.ModTime}
		if err := fn(info); err != nil {
			return err
		}
	}
}

// walkList lists through io.ListableIO.WalkDir, folder by folder.
func walkList(ctx context.Context, fsys iceio.ListableIO, location string, fn func(FileInfo) error) error {
	err := fsys.WalkDir(location, func(p string, d fs.DirEntry, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // nothing there (or a folder emptied during the walk)
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return fn(FileInfo{Path: p, Size: info.Size(), ModTime: info.ModTime()})
	})
	if err != nil {
		return fmt.Errorf("storage: list %s: %w", location, err)
	}
	return nil
}
