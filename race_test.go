//go:build race

package iceberg_test

// raceDetector is true in a build with the race detector, whose instrumentation makes large loads slow.
const raceDetector = true
