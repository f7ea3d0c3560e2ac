package dashboard

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/oncehook/oncehook/admin"
)

// chart is an SVG chart of a source's hours, drawn on the server: a bar of
// received events per hour with its duplicates over it, the duplicate rate
// as a line (right axis, 0 to 100%), and the baseline rate dashed. Each bar
// carries its numbers as data attributes and a <title> tooltip, so that a
// test (and a screen reader) reads what is drawn.
type chart struct {
	W, H      int
	Bars      []bar
	RateLine  string // polyline points
	RateDots  []dot
	Baseline  float64 // y of the baseline rate, or 0 for none
	MaxLabel  string
	Ticks     []tick
	PlotTop   float64
	PlotBot   float64
	PlotLeft  float64
	PlotRight float64
}

type bar struct {
	X, W        float64
	RY, RH      float64 // received
	DY, DH      float64 // duplicates
	Hour        string  // RFC 3339
	Label       string
	Received    int64
	Duplicate   int64
	RatePercent string
}

// dot is one hour's duplicate rate on the line; Label, when set, writes
// it beside the dot (on a day's chart, where there is room): the rate per
// hour is what users come for, and must be readable without hovering.
type dot struct {
	X, Y   float64
	Label  string
	LabelY float64 // above both the dot and its bar
}

type tick struct {
	X     float64
	Label string
	Now   bool // the right end of the axis: the hour (or day) now
}

const (
	chartW  = 720
	chartH  = 150
	padL    = 40.0
	padR    = 40.0
	padTop  = 10.0
	padBot  = 22.0
	barFill = 0.8
)

// newChart draws points (oldest first). A baseline below zero draws none.
func newChart(l Lang, points []admin.SourcePoint, baseline *float64, daily bool) chart {
	c := chart{W: chartW, H: chartH, PlotTop: padTop, PlotBot: chartH - padBot, PlotLeft: padL, PlotRight: chartW - padR}
	if len(points) == 0 {
		return c
	}
	var top int64 = 1
	for _, p := range points {
		top = max(top, p.Received)
	}
	top = niceCeil(top)
	c.MaxLabel = fmt.Sprint(top)
	plotH := c.PlotBot - c.PlotTop
	step := (c.PlotRight - c.PlotLeft) / float64(len(points))
	var line []string
	for i, p := range points {
		x := c.PlotLeft + float64(i)*step
		w := step * barFill
		rh := plotH * float64(p.Received) / float64(top)
		dh := plotH * float64(p.Duplicate) / float64(top)
		b := bar{X: round(x + (step-w)/2), W: round(w), RY: round(c.PlotBot - rh), RH: round(rh), DY: round(c.PlotBot - dh), DH: round(dh),
			Hour: p.At.UTC().Format(time.RFC3339), Received: p.Received, Duplicate: p.Duplicate,
			RatePercent: l.Pct(p.DuplicateRate)}
		if daily {
			b.Label = p.At.UTC().Format("2006-01-02")
		} else {
			b.Label = p.At.UTC().Format("2006-01-02 15:00")
		}
		c.Bars = append(c.Bars, b)
		if p.Received > 0 {
			y := round(c.PlotBot - plotH*p.DuplicateRate)
			line = append(line, fmt.Sprintf("%.1f,%.1f", x+step/2, y))
			d := dot{X: round(x + step/2), Y: y}
			if len(points) <= 48 && p.Duplicate > 0 {
				d.Label, d.LabelY = fmt.Sprintf("%.0f%%", 100*p.DuplicateRate), max(min(y, b.RY)-4, c.PlotTop+8)
			}
			c.RateDots = append(c.RateDots, d)
		}
		// A tick every 6 hours (or every day on a week of hours).
		every := 6
		if len(points) > 48 {
			every = 24
		}
		if daily {
			every = 1
		}
		if i%every == 0 {
			label := p.At.UTC().Format("15h")
			if every == 24 || daily {
				label = l.Day(p.At)
			}
			c.Ticks = append(c.Ticks, tick{X: round(x), Label: label})
		}
	}
	c.Ticks = append(c.Ticks, tick{X: c.PlotRight, Now: true})
	c.RateLine = strings.Join(line, " ")
	if baseline != nil {
		c.Baseline = round(c.PlotBot - plotH**baseline)
	}
	return c
}

// niceCeil rounds n up to 1, 2 or 5 times a power of ten.
func niceCeil(n int64) int64 {
	p := int64(1)
	for {
		for _, m := range []int64{1, 2, 5} {
			if m*p >= n {
				return m * p
			}
		}
		p *= 10
	}
}

// round keeps one decimal: the SVG stays small.
func round(f float64) float64 { return math.Round(f*10) / 10 }
