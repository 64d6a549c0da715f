package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestQuick runs the -quick path of cpu and mor end to end: every point writes, commits and reads its table back
// (a row count mismatch fails the run), and the report and plots come out.
func TestQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	dir := t.TempDir()
	plots := filepath.Join(dir, "plots")
	var out bytes.Buffer
	err := run(context.Background(), []string{"cpu", "mor", "-quick", "-progress=false",
		"-dir", filepath.Join(dir, "data"), "-plots", plots}, &out)
	if err != nil {
		t.Fatal(err)
	}
	md := out.String()
	for _, want := range []string{"## Write throughput: CPU and batch size", "## Merge-on-read", "| 1 | 1,000 |",
		"ours rows/s", "CPU:", "Go: go"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	for _, name := range []string{"cpu.svg", "mor.svg"} {
		b, err := os.ReadFile(filepath.Join(plots, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, []byte("<svg")) || !bytes.Contains(b, []byte("</svg>")) {
			t.Errorf("%s is not an SVG document", name)
		}
	}
}

func TestCommas(t *testing.T) {
	for in, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -4200: "-4,200"} {
		if got := commas(in); got != want {
			t.Errorf("commas(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestArgsAfterSubcommand(t *testing.T) {
	if err := run(context.Background(), []string{"nope"}, &bytes.Buffer{}); err == nil ||
		!strings.Contains(err.Error(), "unknown subcommand") {
		t.Fatalf("got %v", err)
	}
}
