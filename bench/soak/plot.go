//go:build linux

package main

import (
	"bytes"
	"fmt"
	"math"
	"time"
)

// plotSVG draws the flat columns against time, one panel each, every
// y axis from 0 (a drift shows as a slope, not as a zoomed-in wiggle), the
// warm-up shaded. Plain SVG from the standard library: no plotting
// dependency for one picture.
func plotSVG(rows []row, warmup time.Duration) []byte {
	panels := []struct {
		col   int
		title string
	}{
		{colRSS, "gateway RSS (MiB)"},
		{colHeap, "Go heap in use (MiB)"},
		{colGoroutines, "goroutines"},
		{colFDs, "open descriptors"},
		{colConns, "client connections open"},
	}
	const (
		width, panelH, left, right, top, gap = 900, 130, 70, 20, 30, 45
	)
	plotW := float64(width - left - right)
	height := top + len(panels)*(panelH+gap)
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	tEnd := 1.0
	if len(rows) > 0 {
		tEnd = math.Max(rows[len(rows)-1][colElapsed], 1)
	}
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="14">tollgate soak: %s, a sample every %.0f s (warm-up shaded)</text>`+"\n",
		left, time.Duration(tEnd)*time.Second, interval(rows))
	x := func(t float64) float64 { return left + plotW*t/tEnd }
	for i, p := range panels {
		y0 := float64(top + i*(panelH+gap) + 15)
		hi := 0.0
		for _, r := range rows {
			hi = math.Max(hi, r[p.col])
		}
		hi = niceCeil(hi * 1.1)
		y := func(v float64) float64 { return y0 + panelH - panelH*v/hi }
		fmt.Fprintf(&b, `<text x="%d" y="%.0f" font-weight="bold">%s</text>`+"\n", left, y0-5, p.title)
		if w := math.Min(warmup.Seconds(), tEnd); w > 0 {
			fmt.Fprintf(&b, `<rect x="%d" y="%.0f" width="%.1f" height="%d" fill="#eee"/>`+"\n", left, y0, x(w)-left, panelH)
		}
		fmt.Fprintf(&b, `<rect x="%d" y="%.0f" width="%.0f" height="%d" fill="none" stroke="#999"/>`+"\n", left, y0, plotW, panelH)
		for _, v := range []float64{0, hi / 2, hi} {
			fmt.Fprintf(&b, `<text x="%d" y="%.0f" text-anchor="end">%s</text>`+"\n", left-6, y(v)+4, short(v))
			fmt.Fprintf(&b, `<line x1="%d" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, left+plotW, y(v), y(v))
		}
		step := niceCeil(tEnd / 60 / 8) // about 8 ticks, in minutes
		for m := 0.0; m*60 <= tEnd; m += step {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">%s min</text>`+"\n", x(m*60), y0+panelH+15, short(m))
		}
		var pts bytes.Buffer
		for _, r := range rows {
			fmt.Fprintf(&pts, "%.1f,%.1f ", x(r[colElapsed]), y(r[p.col]))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="%s"/>`+"\n", pts.String())
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

func interval(rows []row) float64 {
	if len(rows) < 2 {
		return 0
	}
	return (rows[len(rows)-1][colElapsed] - rows[0][colElapsed]) / float64(len(rows)-1)
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func short(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}
