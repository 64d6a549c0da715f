package iceberg

import (
	"reflect"
	"testing"
	"time"
)

// TestDeprecatedOptionsSetWhatTheirReplacementsSet: each deprecated option name sets exactly what the name that
// replaces it sets, and something.
func TestDeprecatedOptionsSetWhatTheirReplacementsSet(t *testing.T) {
	for _, c := range []struct {
		old, replacement string
		oldOpt, newOpt   Option
	}{
		{"WithAutoCompact", "WithAutoCompactEvery", WithAutoCompact(7), WithAutoCompactEvery(7)},
		{"WithSmallFileCompaction", "WithSmallFileCompactionEvery", WithSmallFileCompaction(7), WithSmallFileCompactionEvery(7)},
		{"WithDeleteConversion", "WithDeleteConversionEvery", WithDeleteConversion(7), WithDeleteConversionEvery(7)},
		{"WithOrphanWindow", "WithOrphanOlderThan", WithOrphanWindow(time.Minute), WithOrphanOlderThan(time.Minute)},
	} {
		var got, want options
		c.oldOpt(&got)
		c.newOpt(&want)
		if reflect.DeepEqual(want, options{}) {
			t.Errorf("%s sets nothing", c.replacement)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s sets %+v, %s sets %+v", c.old, got, c.replacement, want)
		}
	}
}

// TestDeprecatedOrphanWindowDefault: the deprecated default's name is the writer sweep's default.
func TestDeprecatedOrphanWindowDefault(t *testing.T) {
	if DefaultOrphanWindow != DefaultWriterOrphanOlderThan || defaultOptions().maint.orphanAge != DefaultWriterOrphanOlderThan {
		t.Fatalf("DefaultOrphanWindow %s, DefaultWriterOrphanOlderThan %s, default %s", DefaultOrphanWindow,
			DefaultWriterOrphanOlderThan, defaultOptions().maint.orphanAge)
	}
}
