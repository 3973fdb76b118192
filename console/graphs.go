package console

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Graph is one series drawn as an SVG polyline, 600×120, with its last
// value and its peak.
type Graph struct {
	Title, Unit string
	Points      string // the polyline's points
	Last, Peak  float64
	From, To    time.Time
}

const graphW, graphH = 600.0, 120.0

// graphOf draws values (one per sample) against the samples' times.
func graphOf(title, unit string, ss []sample, value func(prev, cur sample) (float64, bool)) Graph {
	g := Graph{Title: title, Unit: unit}
	type pt struct {
		t time.Time
		v float64
	}
	var pts []pt
	for i := range ss {
		var prev sample
		if i > 0 {
			prev = ss[i-1]
		}
		if v, ok := value(prev, ss[i]); ok {
			pts = append(pts, pt{ss[i].At, v})
			g.Peak = max(g.Peak, v)
		}
	}
	if len(pts) == 0 {
		return g
	}
	g.From, g.To, g.Last = pts[0].t, pts[len(pts)-1].t, pts[len(pts)-1].v
	span := g.To.Sub(g.From).Seconds()
	var b strings.Builder
	for _, p := range pts {
		x := 0.0
		if span > 0 {
			x = p.t.Sub(g.From).Seconds() / span * graphW
		}
		y := graphH
		if g.Peak > 0 {
			y = graphH - p.v/g.Peak*(graphH-4)
		}
		fmt.Fprintf(&b, "%.1f,%.1f ", x, y)
	}
	g.Points = strings.TrimSpace(b.String())
	return g
}

// rate is the rise of count per second between two samples; a fall (a
// run restarted, a site gone) draws nothing.
func rate(count func(sample) int64) func(prev, cur sample) (float64, bool) {
	return func(prev, cur sample) (float64, bool) {
		dt := cur.At.Sub(prev.At).Seconds()
		if prev.At.IsZero() || dt <= 0 || count(cur) < count(prev) {
			return 0, false
		}
		return float64(count(cur)-count(prev)) / dt, true
	}
}

func level(count func(sample) int64) func(prev, cur sample) (float64, bool) {
	return func(_, cur sample) (float64, bool) { return float64(count(cur)), true }
}

func (h *Handler) graphsPage(w http.ResponseWriter, r *http.Request) {
	_, ss, _ := h.watch.last()
	gs := []Graph{
		graphOf("Messages applied by the runs that answer", "msg/s", ss, rate(func(s sample) int64 { return s.Applied })),
		graphOf("Messages applied at the edge sites (their records)", "msg/s", ss, rate(func(s sample) int64 { return s.Sites })),
		graphOf("Lag: messages not yet delivered, copied or applied", "messages", ss, level(func(s sample) int64 { return s.Lag })),
		graphOf("Attention: rows and records that need a person", "", ss, level(func(s sample) int64 { return s.Attention })),
	}
	h.render(w, r, "graphs", sessionOf(r), struct {
		Graphs  []Graph
		Samples int
		Every   time.Duration
	}{gs, len(ss), h.opts.Refresh})
}
