package benchpair

import (
	"os"
	"runtime/pprof"
)

// StartCPUProfile writes a CPU profile of what runs until stop is called into the file at path (created or
// truncated): where a measured setup spends its time, to read with go tool pprof.
func StartCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
