package iceberg

import (
	"os"
	"testing"
)

// soak returns the size of a test's random rounds, trials or rows: small by default, full when the environment
// sets ICEWRITER_SOAK=1 (CI's integration step runs the soak tests so; see docs/testing.md). small must still
// reach every branch the test checks, so that the default run can fail on the defect the test was written for.
func soak(t testing.TB, small, full int) int {
	t.Helper()
	if os.Getenv("ICEWRITER_SOAK") == "1" {
		t.Logf("ICEWRITER_SOAK=1: %d (default %d)", full, small)
		return full
	}
	return small
}

// SoakForTest is soak for the external tests.
func SoakForTest(t testing.TB, small, full int) int {
	t.Helper()
	return soak(t, small, full)
}
