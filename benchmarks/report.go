package main

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strings"
	"time"
)

func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "0"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
}

func fmtRate(v float64) string {
	switch {
	case v >= 100:
		return withCommas(int64(math.Round(v)))
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func withCommas(n int64) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func fmtRatio(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) || v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", v)
}

func fmtCmds(v float64) string {
	if v < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f", v)
}

func q(x *quantile, f func(*quantile) time.Duration) string {
	if x == nil {
		return "–"
	}
	return fmtDur(f(x))
}

func p50(x *quantile) time.Duration { return x.P50 }
func p99(x *quantile) time.Duration { return x.P99 }

// results returns the results of one scenario, in run order.
func (rep *report) results(sc string) []*result {
	var out []*result
	for _, r := range rep.Results {
		if r.Scenario == sc {
			out = append(out, r)
		}
	}
	return out
}

func (rep *report) floor(sc string) *result {
	for _, r := range rep.results(sc) {
		if r.Library == "floor" {
			return r
		}
	}
	return nil
}

// notes lists what went wrong or needs saying about a result.
func notes(r *result) string {
	var n []string
	if r.Violations > 0 {
		n = append(n, fmt.Sprintf("**MUTUAL EXCLUSION VIOLATED %d×**", r.Violations))
	}
	if r.Errors > 0 {
		first := strings.Join(strings.Fields(strings.ReplaceAll(r.FirstError, "|", "/")), " ")
		n = append(n, fmt.Sprintf("%d errors (first: %s)", r.Errors, first))
	}
	if r.GiveUps > 0 {
		n = append(n, fmt.Sprintf("%d give-ups", r.GiveUps))
	}
	if r.Note != "" {
		n = append(n, r.Note)
	}
	return strings.Join(n, "; ")
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

func markdown(rep *report) string {
	var w strings.Builder
	m := rep.Machine
	fmt.Fprintf(&w, "## rlock vs Go peers vs the floor (%s)\n\n", rep.Time.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&w, "- Machine: %s, %d CPUs (this run could use %d; GOMAXPROCS %d), %s, %s\n", m.CPU, m.NumCPU, m.UsableCPUs, m.GOMAXPROCS, m.Kernel, m.Go)
	fmt.Fprintf(&w, "- Server: %s on loopback, started by the benchmark\n", m.Server)
	fmt.Fprintf(&w, "- Placement: %s\n", m.Placement)
	fmt.Fprintf(&w, "- Command: `%s` (%s per contender, scenario and round; %s rounds, interleaved; took %v)\n",
		rep.Command, rep.Settings["duration"], rep.Settings["rounds"], rep.TotalTime.Round(time.Second))
	if n := rep.Settings["note"]; n != "" {
		fmt.Fprintf(&w, "- **Note:** %s\n", n)
	}
	w.WriteString("- requests/op: commands the clients sent (client-side count; a script call is one; go-redis pub/sub SUBSCRIBEs not seen). server cmds/op: commands Redis ran (INFO commandstats deltas), commands run inside Lua scripts included.\n")
	w.WriteString("- Ratios are against the floor (`SET key token NX PX` + compare-and-delete script; contended: retried every 1 ms) measured in the same run. Absolute times depend on the machine.\n")
	for _, r := range rep.results("rtt") {
		fmt.Fprintf(&w, "- One Redis round trip (PING): p50 %s, p99 %s\n", q(r.Lat, p50), q(r.Lat, p99))
	}
	w.WriteString("\n")
	if sum := summary(rep); strings.Count(sum, "\n") > 2 {
		w.WriteString("### Summary\n\nThe headline figure of each scenario; in brackets its ratio to the row's reference in this run (the floor; redsync for RedLock; the Redisson-layout floor for the latch). Every figure is in the sections below.\n\n" + sum + "\n")
	}

	for _, sc := range rep.Order {
		if sc == "rtt" {
			continue
		}
		fmt.Fprintf(&w, "### %s. %s\n\n", sc, rep.Titles[sc])
		rs := rep.results(sc)
		if len(rs) == 0 {
			fmt.Fprintf(&w, "_%s_\n\n", rep.Skipped[sc])
			continue
		}
		fl := rep.floor(sc)
		if isSyncScenario(sc) {
			syncTable(&w, rep, sc, rs)
			if s := rep.Skipped[sc]; s != "" {
				fmt.Fprintf(&w, "\n_%s_\n", s)
			}
			w.WriteString("\n")
			continue
		}
		if isRWScenario(sc) {
			rwTable(&w, rep, sc, rs)
			if s := rep.Skipped[sc]; s != "" {
				fmt.Fprintf(&w, "\n_%s_\n", s)
			}
			w.WriteString("\n")
			continue
		}
		switch tableOf(sc) {
		case "1", "5":
			w.WriteString("| contender | nodes | lock+unlock p50 | p99 | ops/s | p50 vs floor | ops/s vs floor | requests/op | server cmds/op | notes |\n|---|---|---|---|---|---|---|---|---|---|\n")
			for _, r := range rs {
				var rp, ro float64
				if fl != nil && fl.Lat != nil && r.Lat != nil {
					rp = ratio(float64(r.Lat.P50), float64(fl.Lat.P50))
					ro = ratio(r.OpsPerSec, fl.OpsPerSec)
				}
				fmt.Fprintf(&w, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Contender, r.Nodes, q(r.Lat, p50), q(r.Lat, p99),
					fmtRate(r.OpsPerSec), fmtRatio(rp), fmtRatio(ro), fmtCmds(r.ReqsPerOp), fmtCmds(r.CmdsPerOp), notes(r))
			}
		case "2":
			fmt.Fprintf(&w, "%s goroutines, each on its own key, one client (go-redis defaults: pool of 10 per CPU).\n\n", rep.Settings["parallel"])
			w.WriteString("| contender | lock+unlock pairs/s | vs floor | p50 | p99 | requests/op | server cmds/op | notes |\n|---|---|---|---|---|---|---|---|\n")
			for _, r := range rs {
				var ro float64
				if fl != nil {
					ro = ratio(r.OpsPerSec, fl.OpsPerSec)
				}
				fmt.Fprintf(&w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Contender, fmtRate(r.OpsPerSec), fmtRatio(ro),
					q(r.Lat, p50), q(r.Lat, p99), fmtCmds(r.ReqsPerOp), fmtCmds(r.CmdsPerOp), notes(r))
			}
		case "3", "3s", "4":
			kindOf := "busy"
			if sc == "3s" {
				kindOf = "sleeping"
			}
			fmt.Fprintf(&w, "16 goroutines over 4 clients on one key, %s %s critical section. Handoff: from the holder calling Unlock to another goroutine's Lock returning. Wait: one Lock call, give-ups included; calls still waiting at the end count up to the end.\n\n", rep.Settings["section"], kindOf)
			w.WriteString("| contender | grants/s | vs floor | to another goroutine | handoff p50 | handoff p99 | wait p50 | wait p99 | requests/grant | server cmds/grant | mutual exclusion |")
			if sc == "4" {
				w.WriteString(" FIFO violations |")
			}
			w.WriteString(" notes |\n|---|---|---|---|---|---|---|---|---|---|---|")
			if sc == "4" {
				w.WriteString("---|")
			}
			w.WriteString("---|\n")
			for _, r := range rs {
				var ro float64
				if fl != nil {
					ro = ratio(r.OpsPerSec, fl.OpsPerSec)
				}
				mx := "held"
				if r.Violations > 0 {
					mx = fmt.Sprintf("**VIOLATED %d×**", r.Violations)
				}
				fmt.Fprintf(&w, "| %s | %s | %s | %.0f%% | %s | %s | %s | %s | %s | %s | %s |", r.Contender, fmtRate(r.OpsPerSec), fmtRatio(ro),
					100*r.HandoffPart, q(r.Handoff, p50), q(r.Handoff, p99), q(r.Wait, p50), q(r.Wait, p99), fmtCmds(r.ReqsPerOp), fmtCmds(r.CmdsPerOp), mx)
				if sc == "4" {
					fmt.Fprintf(&w, " %d |", r.FIFOViolations)
				}
				fmt.Fprintf(&w, " %s |\n", notes(r))
			}
		default:
			for _, r := range rs {
				fmt.Fprintf(&w, "%s", r.Contender)
				if n := notes(r); n != "" {
					fmt.Fprintf(&w, " — %s", n)
				}
				w.WriteString("\n\n| figure | value |\n|---|---|\n")
				var names []string
				for k := range r.Figures {
					names = append(names, k)
				}
				slices.Sort(names)
				for _, k := range names {
					fmt.Fprintf(&w, "| %s | %s |\n", strings.ReplaceAll(k, "_", " "), fmtFigure(r.Figures[k]))
				}
			}
		}
		if s := rep.Skipped[sc]; s != "" {
			fmt.Fprintf(&w, "\n_%s_\n", s)
		}
		w.WriteString("\n")
	}
	return w.String()
}

func fmtFigure(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e12 {
		return withCommas(int64(v))
	}
	if math.Abs(v) >= 100 {
		return withCommas(int64(math.Round(v)))
	}
	return fmt.Sprintf("%.3g", v)
}

// --- chart ---------------------------------------------------------------

type panel struct {
	title string
	ratio bool // a ratio against the floor: draw the 1× line
	unit  string
	bars  []bar
}

type bar struct {
	label, library string
	value          float64
}

var libraryColor = map[string]string{
	"floor":          "#8c8c8c",
	"redlock-floor":  "#b5b5b5",
	"redisson-floor": "#a0a0a0",
	"rlock":          "#1f6fd1",
	"redsync":        "#e07b16",
	"redislock":      "#2c9c4a",
	"rueidislock":    "#8e44ad",
}

func panels(rep *report) []panel {
	var ps []panel
	add := func(sc, title string, isRatio bool, unit string, value func(r, floor *result) float64) {
		fl := rep.floor(sc)
		p := panel{title: title, ratio: isRatio, unit: unit}
		for _, r := range rep.results(sc) {
			if v := value(r, fl); !math.IsNaN(v) && !math.IsInf(v, 0) {
				p.bars = append(p.bars, bar{label: r.Contender, library: r.Library, value: v})
			}
		}
		if len(p.bars) > 0 {
			ps = append(ps, p)
		}
	}
	nan := math.NaN()
	add("1", "1 · uncontended lock+unlock p50, × floor (lower is better)", true, "×", func(r, f *result) float64 {
		if f == nil || f.Lat == nil || r.Lat == nil {
			return nan
		}
		return ratio(float64(r.Lat.P50), float64(f.Lat.P50))
	})
	add("2", "2 · "+rep.Settings["parallel"]+" goroutines on as many keys, lock+unlock pairs/s, × floor (higher is better)", true, "×", func(r, f *result) float64 {
		if f == nil {
			return nan
		}
		return ratio(r.OpsPerSec, f.OpsPerSec)
	})
	add("3", "3 · contended grants/s, × floor (higher is better)", true, "×", func(r, f *result) float64 {
		if f == nil {
			return nan
		}
		return ratio(r.OpsPerSec, f.OpsPerSec)
	})
	add("3", "3 · contended: grants to another goroutine, % (higher is fairer)", false, "%", func(r, _ *result) float64 {
		return 100 * r.HandoffPart
	})
	add("3", "3 · contended: wait p99 per Lock call, ms (lower is better)", false, "ms", func(r, _ *result) float64 {
		if r.Wait == nil {
			return nan
		}
		return float64(r.Wait.P99) / float64(time.Millisecond)
	})
	add("4", "4 · fair handoff: wait p99 per Lock call, ms (lower is better)", false, "ms", func(r, _ *result) float64 {
		if r.Wait == nil {
			return nan
		}
		return float64(r.Wait.P99) / float64(time.Millisecond)
	})
	add("5", "5 · lock+unlock p50 on 1 or 5 nodes, × floor on 1 node (lower is better)", true, "×", func(r, f *result) float64 {
		if f == nil || f.Lat == nil || r.Lat == nil {
			return nan
		}
		return ratio(float64(r.Lat.P50), float64(f.Lat.P50))
	})
	syncPanels(add)
	return ps
}

func chart(rep *report) string {
	const (
		width   = 900
		labelW  = 330
		barMaxW = 470
		barH    = 16
		gap     = 4
		titleH  = 28
		padding = 14
	)
	ps := panels(rep)
	height := 64
	for _, p := range ps {
		height += titleH + len(p.bars)*(barH+gap) + padding
	}
	var w strings.Builder
	fmt.Fprintf(&w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&w, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	m := rep.Machine
	fmt.Fprintf(&w, `<text x="10" y="20" font-size="15" font-weight="bold">%s</text>`+"\n", html.EscapeString("rlock vs Go peers vs the floor, same run, interleaved"))
	fmt.Fprintf(&w, `<text x="10" y="38" fill="#444">%s</text>`+"\n", html.EscapeString(fmt.Sprintf("%s, %d CPUs; %s; %s", m.CPU, m.NumCPU, m.Server, m.Placement)))
	fmt.Fprintf(&w, `<text x="10" y="54" fill="#444">%s</text>`+"\n", html.EscapeString(fmt.Sprintf("%s — %s", rep.Command, rep.Time.Format("2006-01-02"))))
	y := 64
	for _, p := range ps {
		y += titleH
		fmt.Fprintf(&w, `<text x="10" y="%d" font-weight="bold">%s</text>`+"\n", y-8, html.EscapeString(p.title))
		maxV := 0.0
		for _, b := range p.bars {
			maxV = math.Max(maxV, b.value)
		}
		if p.ratio {
			maxV = math.Max(maxV, 1)
		}
		if maxV <= 0 {
			maxV = 1
		}
		scale := float64(barMaxW) / (maxV * 1.08)
		top := y
		for _, b := range p.bars {
			color := libraryColor[b.library]
			if color == "" {
				color = "#555"
			}
			bw := math.Max(1, b.value*scale)
			fmt.Fprintf(&w, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", labelW-6, y+barH-4, html.EscapeString(b.label))
			fmt.Fprintf(&w, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", labelW, y, bw, barH, color)
			val := fmt.Sprintf("%.2f%s", b.value, p.unit)
			if p.unit == "%" || p.unit == "ms" && b.value >= 10 {
				val = fmt.Sprintf("%.0f %s", b.value, p.unit)
			} else if p.unit == "ms" {
				val = fmt.Sprintf("%.2f %s", b.value, p.unit)
			}
			fmt.Fprintf(&w, `<text x="%.1f" y="%d" fill="#222">%s</text>`+"\n", float64(labelW)+bw+4, y+barH-4, html.EscapeString(val))
			y += barH + gap
		}
		if p.ratio {
			x := float64(labelW) + scale
			fmt.Fprintf(&w, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#000" stroke-dasharray="3,3"/>`+"\n", x, top-2, x, y-gap+2)
		}
		y += padding
	}
	w.WriteString("</svg>\n")
	return w.String()
}
