// Package benchpair compares setups measured in pairs within one benchmark run: each iteration runs every setup
// once, and the ratio of two setups is the median over iterations of their paired ratios, so the drift and bursts
// of a shared machine fall on both sides of each pair and out of the figure. CPUTime measures what a setup adds
// whatever else the machine runs.
package benchpair

import "slices"

// Median is the median of v (0 for none).
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// Ratio is the median over iterations of base[i]/x[i]: with times, x's rate relative to base's (above 1: x is
// faster).
func Ratio(base, x []float64) float64 {
	r := make([]float64, min(len(base), len(x)))
	for i := range r {
		r[i] = base[i] / x[i]
	}
	return Median(r)
}
