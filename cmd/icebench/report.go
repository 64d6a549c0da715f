package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// section is one table of the report: markdown, plus an optional plot.
type section struct {
	name   string // file name of the plot, subcommand
	title  string
	notes  []string
	header []string
	rows   [][]string
	after  []string
	plot   *plot
}

func (s *section) add(cells ...string) { s.rows = append(s.rows, cells) }

// write prints the section as markdown; plotRef is the plot's path relative to the markdown ("" for none).
func (s *section) write(w io.Writer, plotRef string) {
	fmt.Fprintf(w, "## %s\n\n", s.title)
	for _, n := range s.notes {
		fmt.Fprintf(w, "%s\n\n", n)
	}
	if len(s.header) > 0 {
		fmt.Fprintf(w, "| %s |\n", strings.Join(s.header, " | "))
		seps := make([]string, len(s.header))
		for i := range seps {
			seps[i] = "---"
			if i > 0 {
				seps[i] = "---:"
			}
		}
		fmt.Fprintf(w, "|%s|\n", strings.Join(seps, "|"))
		for _, r := range s.rows {
			fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
		}
		fmt.Fprintln(w)
	}
	for _, n := range s.after {
		fmt.Fprintf(w, "%s\n\n", n)
	}
	if plotRef != "" {
		fmt.Fprintf(w, "![%s](%s)\n\n", s.title, plotRef)
	}
}

// writePlot saves the section's plot as DIR/NAME.svg and returns its path.
func (s *section) writePlot(dir string) (string, error) {
	if s.plot == nil || dir == "" {
		return "", nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	p := filepath.Join(dir, s.name+".svg")
	return p, os.WriteFile(p, []byte(s.plot.svg()), 0o644)
}

// Number formatting.

func fmtRate(r float64) string {
	if r <= 0 || math.IsNaN(r) {
		return "–"
	}
	return commas(int64(math.Round(r)))
}

func fmtRatio(a, b float64) string {
	if a <= 0 || b <= 0 || math.IsNaN(a) || math.IsNaN(b) {
		return "–"
	}
	r := a / b
	switch {
	case r >= 100:
		return fmt.Sprintf("%.0fx", r)
	case r >= 10:
		return fmt.Sprintf("%.1fx", r)
	default:
		return fmt.Sprintf("%.2fx", r)
	}
}

func commas(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func fmtBytes(n float64) string {
	switch {
	case n <= 0 || math.IsNaN(n):
		return "–"
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", n/(1<<20))
	case n >= 10<<10:
		return fmt.Sprintf("%.0f KiB", n/(1<<10))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", n/(1<<10))
	default:
		return fmt.Sprintf("%.0f B", n)
	}
}
