package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// The summary: one table per run, the headline figure of each scenario
// for a few contenders, each with its ratio to the scenario's reference
// measured in the same run. docs/benchmarks.md shows it for each
// placement; results-<placement>.md starts with it; -summary FILE prints
// it from a results JSON.

// summaryColumns are the summary's contenders, as column heads.
var summaryColumns = []string{"floor", "Redisson-layout floor", "exactly-once floor", "rlock", "redsync", "redislock", "rueidislock"}

// summaryRow is one figure of one scenario: which contender (by label
// prefix) fills each column, the figure, and the column whose figure the
// others are divided by (none: no ratio).
type summaryRow struct {
	sc, what string
	labels   map[string]string // column -> contender label prefix
	ref      string            // reference column
	value    func(*result) (float64, string)
	higher   bool // a larger figure is better (the ratio then reads "× as many")
}

var lockColumns = map[string]string{
	"floor":                 "floor (SET NX PX",
	"Redisson-layout floor": "redisson-floor (Redisson-layout scripts",
	"exactly-once floor":    "redisson-floor (the same with exactly-once",
	"rlock":                 "rlock (reentrant)",
	"redsync":               "redsync (defaults",
	"redislock":             "redislock (doc example",
	"rueidislock":           "rueidislock (README",
}

func withColumns(m map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			delete(out, kv[i])
		} else {
			out[kv[i]] = kv[i+1]
		}
	}
	return out
}

func p50Of(r *result) (float64, string) {
	if r.Lat == nil {
		return 0, ""
	}
	return float64(r.Lat.P50), fmtDur(r.Lat.P50)
}

func waitP99Of(r *result) (float64, string) {
	if r.Wait == nil {
		return 0, ""
	}
	return float64(r.Wait.P99), fmtDur(r.Wait.P99)
}

func waitP50Of(r *result) (float64, string) {
	if r.Wait == nil {
		return 0, ""
	}
	return float64(r.Wait.P50), fmtDur(r.Wait.P50)
}

func rateOf(r *result) (float64, string) { return r.OpsPerSec, fmtRate(r.OpsPerSec) }

func handoffsOf(r *result) (float64, string) {
	return r.HandoffPart, fmt.Sprintf("%.0f%%", 100*r.HandoffPart)
}

func cmdsOf(r *result) (float64, string) {
	if r.CmdsPerOp < 0 {
		return 0, ""
	}
	return r.CmdsPerOp, fmtCmds(r.CmdsPerOp)
}

func summaryRows() []summaryRow {
	semCols := map[string]string{"floor": "floor (GET/DECRBY", "Redisson-layout floor": "redisson-floor (RSemaphore", "rlock": "rlock (semaphore.New)"}
	expCols := map[string]string{"floor": "floor (GET/DECRBY", "Redisson-layout floor": "redisson-floor (RPermitExpirable", "rlock": "rlock (semaphore.NewExpirable"}
	latchCols := map[string]string{"Redisson-layout floor": "redisson-floor (RCountDownLatch", "rlock": "rlock (latch.New)"}
	redlockCols := map[string]string{"floor": "redlock-floor (SET NX PX", "Redisson-layout floor": "redlock-floor (Redisson-layout scripts, parked", "exactly-once floor": "redlock-floor (the same with exactly-once", "rlock": "rlock (RedLock", "redsync": "redsync (defaults"}
	return []summaryRow{
		{sc: "1", what: "uncontended lock+unlock, p50", labels: lockColumns, ref: "floor", value: p50Of},
		{sc: "1", what: "the same, rlock with context.Background()", labels: map[string]string{"floor": lockColumns["floor"], "rlock": "rlock (reentrant, context.Background()"}, ref: "floor", value: p50Of},
		{sc: "2", what: "64 goroutines on 64 keys, pairs/s", labels: withColumns(lockColumns, "rlock", "rlock (reentrant, WithAutoPipeline", "rueidislock", "rueidislock (README"), ref: "floor", value: rateOf, higher: true},
		{sc: "3", what: "contended (busy 1 ms section), grants/s", labels: lockColumns, ref: "floor", value: rateOf, higher: true},
		{sc: "3", what: "contended, wait p99", labels: lockColumns, value: waitP99Of},
		{sc: "3", what: "contended, grants to another goroutine", labels: lockColumns, value: handoffsOf, higher: true},
		{sc: "3", what: "contended, server commands per grant", labels: lockColumns, value: cmdsOf},
		{sc: "3s", what: "contended (sleeping 1 ms section), grants/s", labels: lockColumns, ref: "floor", value: rateOf, higher: true},
		{sc: "3s", what: "contended (sleeping), wait p99", labels: lockColumns, value: waitP99Of},
		{sc: "4", what: "fair lock (rlock fair) contended, wait p99", labels: map[string]string{"rlock": "rlock (fair)"}, value: waitP99Of},
		{sc: "5", what: "RedLock over 5 nodes, lock+unlock p50", labels: redlockCols, ref: "redsync", value: p50Of},
		{sc: "11", what: "semaphore acquire+release, p50", labels: semCols, ref: "floor", value: p50Of},
		{sc: "11", what: "expirable semaphore acquire+release, p50", labels: expCols, ref: "floor", value: p50Of},
		{sc: "12", what: "semaphore, 16 goroutines on 4 permits, acquires/s", labels: semCols, ref: "floor", value: rateOf, higher: true},
		{sc: "12", what: "the same, wait p99", labels: semCols, value: waitP99Of},
		{sc: "12", what: "expirable semaphore, 16 goroutines on 4 permits, acquires/s", labels: expCols, ref: "floor", value: rateOf, higher: true},
		{sc: "13", what: "latch, 64 waiters: last CountDown to every waiter woken, p50", labels: latchCols, ref: "Redisson-layout floor", value: waitP50Of},
	}
}

// find returns the first result of scenario sc whose label starts with
// prefix.
func (rep *report) find(sc, prefix string) *result {
	for _, r := range rep.results(sc) {
		if strings.HasPrefix(r.Contender, prefix) {
			return r
		}
	}
	return nil
}

// summary renders the summary table of rep: only the rows of scenarios it
// ran and the columns some row fills.
func summary(rep *report) string {
	rows := summaryRows()
	used := map[string]bool{}
	var lines [][]string
	for _, row := range rows {
		if len(rep.results(row.sc)) == 0 {
			continue
		}
		var ref float64
		if row.ref != "" {
			if r := rep.find(row.sc, row.labels[row.ref]); r != nil {
				ref, _ = row.value(r)
			}
		}
		line := []string{row.sc, row.what}
		filled := false
		for _, col := range summaryColumns {
			prefix, ok := row.labels[col]
			r := (*result)(nil)
			if ok {
				r = rep.find(row.sc, prefix)
			}
			if r == nil {
				line = append(line, "")
				continue
			}
			v, text := row.value(r)
			if text == "" {
				line = append(line, "")
				continue
			}
			if ref > 0 && v > 0 {
				text += " (" + fmtRatio(v/ref) + ")"
			}
			if r.Violations > 0 {
				text += " **VIOLATED**"
			}
			line = append(line, text)
			used[col] = true
			filled = true
		}
		if filled {
			lines = append(lines, line)
		}
	}
	var w strings.Builder
	w.WriteString("| scenario | figure |")
	for _, col := range summaryColumns {
		if used[col] {
			fmt.Fprintf(&w, " %s |", col)
		}
	}
	w.WriteString("\n|---|---|")
	for _, col := range summaryColumns {
		if used[col] {
			w.WriteString("---|")
		}
	}
	w.WriteString("\n")
	for _, line := range lines {
		fmt.Fprintf(&w, "| %s | %s |", line[0], line[1])
		for i, col := range summaryColumns {
			if used[col] {
				fmt.Fprintf(&w, " %s |", line[2+i])
			}
		}
		w.WriteString("\n")
	}
	return w.String()
}

// summaryHeader says where the summary's figures come from.
func summaryHeader(rep *report) string {
	m := rep.Machine
	return fmt.Sprintf("%s, %s, %s; `%s` (%s per contender, scenario and round, %s rounds, interleaved; %s, took %v). In brackets: the ratio to the row's reference measured in the same run (the floor; redsync for RedLock; the Redisson-layout floor for the latch).\n\n",
		m.Placement, m.Server, m.CPU, rep.Command, rep.Settings["duration"], rep.Settings["rounds"], rep.Time.Format("2006-01-02 15:04 MST"), rep.TotalTime.Round(time.Second))
}

// printSummary is the -summary mode: the summary of a results JSON.
func printSummary(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var rep report
	if err := json.Unmarshal(data, &rep); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	fmt.Print(summaryHeader(&rep) + summary(&rep))
	return nil
}
