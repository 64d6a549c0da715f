package main

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// plot is a dependency-free SVG chart: grouped bars over categories, or lines over a numeric x axis. NaN
// values are left out (a figure that does not exist).
type plot struct {
	title  string
	ylabel string
	xlabel string
	logY   bool
	logX   bool
	// bars: categories on x, one bar per series.
	categories []string
	// lines: x values shared by every series.
	xs     []float64
	series []series
}

type series struct {
	name   string
	values []float64
	dashed bool
	points bool   // markers only, no line (seed figures)
	color  string // default: the palette by position
}

func (p *plot) color(i int) string {
	if c := p.series[i].color; c != "" {
		return c
	}
	return palette[i%len(palette)]
}

var palette = []string{"#1f77b4", "#d62728", "#7f7f7f", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf"}

const (
	plotW, plotH               = 760.0, 450.0
	padL, padR, padT, padB     = 80.0, 20.0, 40.0, 125.0
	innerW, innerH             = plotW - padL - padR, plotH - padT - padB
	legendRowH, legendColWidth = 16.0, 330.0
)

func (p *plot) yRange() (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, s := range p.series {
		for _, v := range s.values {
			if math.IsNaN(v) || (p.logY && v <= 0) {
				continue
			}
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if math.IsInf(lo, 1) {
		return 1, 10
	}
	if p.logY {
		lo = math.Pow(10, math.Floor(math.Log10(lo)))
		hi = math.Pow(10, math.Ceil(math.Log10(hi)))
		if lo == hi {
			hi = lo * 10
		}
		return lo, hi
	}
	lo = 0
	if hi <= 0 {
		hi = 1
	}
	step := niceStep(hi / 5)
	return 0, math.Ceil(hi/step) * step
}

func niceStep(x float64) float64 {
	e := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*e >= x {
			return m * e
		}
	}
	return 10 * e
}

func (p *plot) yPos(v, lo, hi float64) float64 {
	var f float64
	if p.logY {
		f = (math.Log10(v) - math.Log10(lo)) / (math.Log10(hi) - math.Log10(lo))
	} else {
		f = (v - lo) / (hi - lo)
	}
	return padT + innerH*(1-f)
}

func (p *plot) svg() string {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n",
		plotW, plotH, plotW, plotH)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", padL, esc(p.title))
	lo, hi := p.yRange()
	// y grid and labels
	var ticks []float64
	if p.logY {
		for v := lo; v <= hi*1.0001; v *= 10 {
			ticks = append(ticks, v)
		}
	} else {
		step := niceStep((hi - lo) / 5)
		for v := lo; v <= hi+step/1000; v += step {
			ticks = append(ticks, v)
		}
	}
	for _, t := range ticks {
		y := p.yPos(t, lo, hi)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", padL, y, padL+innerW, y)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", padL-6, y+4, esc(shortNum(t)))
	}
	fmt.Fprintf(&b, `<text transform="translate(16,%.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n",
		padT+innerH/2, esc(p.ylabel))
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", padL, padT+innerH, padL+innerW, padT+innerH)
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", padL, padT, padL, padT+innerH)
	if len(p.categories) > 0 {
		p.bars(&b, lo, hi)
	} else {
		p.lines(&b, lo, hi)
	}
	// legend
	for i, s := range p.series {
		col, row := i%2, i/2
		x := padL + float64(col)*legendColWidth
		y := plotH - padB + 48 + float64(row)*legendRowH
		c := p.color(i)
		if s.points {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"/>`, x+8, y-4, c)
		} else {
			dash := ""
			if s.dashed {
				dash = ` stroke-dasharray="5,3"`
			}
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="6"%s/>`, x, y-4, x+16, y-4, c, dash)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", x+22, y, esc(s.name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func (p *plot) bars(b *strings.Builder, lo, hi float64) {
	n := len(p.categories)
	groupW := innerW / float64(n)
	barW := groupW * 0.8 / float64(max(1, len(p.series)))
	base := padT + innerH
	for ci, cat := range p.categories {
		gx := padL + float64(ci)*groupW + groupW*0.1
		for si, s := range p.series {
			if ci >= len(s.values) {
				continue
			}
			v := s.values[ci]
			if math.IsNaN(v) || (p.logY && v <= 0) {
				continue
			}
			y := p.yPos(math.Max(v, lo), lo, hi)
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %s</title></rect>`+"\n",
				gx+float64(si)*barW, y, barW*0.92, base-y, p.color(si), esc(s.name), esc(cat), esc(shortNum(v)))
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="11">%s</text>`+"\n",
			padL+(float64(ci)+0.5)*groupW, base+16, esc(cat))
	}
	if p.xlabel != "" {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", padL+innerW/2, base+34, esc(p.xlabel))
	}
}

func (p *plot) xPos(x, lo, hi float64) float64 {
	if p.logX {
		return padL + innerW*0.04 + innerW*0.92*(math.Log10(x)-math.Log10(lo))/math.Max(1e-9, math.Log10(hi)-math.Log10(lo))
	}
	return padL + innerW*0.04 + innerW*0.92*(x-lo)/math.Max(1e-9, hi-lo)
}

func (p *plot) lines(b *strings.Builder, lo, hi float64) {
	if len(p.xs) == 0 {
		return
	}
	xlo, xhi := p.xs[0], p.xs[0]
	for _, x := range p.xs {
		xlo, xhi = math.Min(xlo, x), math.Max(xhi, x)
	}
	base := padT + innerH
	for _, x := range p.xs {
		px := p.xPos(x, xlo, xhi)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", px, padT, px, base)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", px, base+16, esc(shortNum(x)))
	}
	if p.xlabel != "" {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", padL+innerW/2, base+34, esc(p.xlabel))
	}
	for si, s := range p.series {
		c := p.color(si)
		var pts []string
		for i, v := range s.values {
			if i >= len(p.xs) || math.IsNaN(v) || (p.logY && v <= 0) {
				continue
			}
			x, y := p.xPos(p.xs[i], xlo, xhi), p.yPos(v, lo, hi)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="%d" fill="%s"><title>%s at %s: %s</title></circle>`+"\n",
				x, y, map[bool]int{true: 5, false: 3}[s.points], c, esc(s.name), esc(shortNum(p.xs[i])), esc(shortNum(v)))
		}
		if !s.points && len(pts) > 1 {
			dash := ""
			if s.dashed {
				dash = ` stroke-dasharray="6,4"`
			}
			fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), c, dash)
		}
	}
}

func shortNum(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e9:
		return trimZero(v/1e9) + "G"
	case a >= 1e6:
		return trimZero(v/1e6) + "M"
	case a >= 1e3:
		return trimZero(v/1e3) + "k"
	case a >= 1 || a == 0:
		return trimZero(v)
	default:
		return fmt.Sprintf("%.2g", v)
	}
}

func trimZero(v float64) string {
	s := fmt.Sprintf("%.1f", v)
	return strings.TrimSuffix(s, ".0")
}

func esc(s string) string { return html.EscapeString(s) }
