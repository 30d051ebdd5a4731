package loadtest

import "time"

// computeTrend fits least-squares lines over the windows: corrected p99 and
// the RSS of server and injector against time in minutes. A soak run that
// leaks or degrades shows a positive slope. Runs shorter than
// TrendWindowCountMin windows report zero slopes.
func computeTrend(windows []Window) Trend {
	if len(windows) < TrendWindowCountMin {
		return Trend{}
	}
	var p99, server, injector []point
	for _, w := range windows {
		x := float64(w.Second) / 60
		if w.Requests > 0 {
			p99 = append(p99, point{x, w.Corrected.P99})
		}
		if w.Server != nil {
			server = append(server, point{x, float64(w.Server.RSSBytes)})
		}
		if w.Injector != nil {
			injector = append(injector, point{x, float64(w.Injector.RSSBytes)})
		}
	}
	return Trend{
		P99MsPerMinute:            slope(p99),
		ServerRSSBytesPerMinute:   slope(server),
		InjectorRSSBytesPerMinute: slope(injector),
	}
}

type point struct{ x, y float64 }

// slope returns the least-squares slope of points, 0 with fewer than two
// distinct x values.
func slope(points []point) float64 {
	n := float64(len(points))
	if n < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for _, p := range points {
		sx += p.x
		sy += p.y
		sxx += p.x * p.x
		sxy += p.x * p.y
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / den
}

func secondsToDuration(s int) time.Duration { return time.Duration(s) * time.Second }
