package main

import (
	"slices"
	"strings"
	"time"
)

// result is what one contender measured in one scenario, summed over the
// rounds of the run.
type result struct {
	Scenario  string `json:"scenario"`
	Contender string `json:"contender"`
	Library   string `json:"library"`
	Config    string `json:"config"`
	Nodes     int    `json:"nodes"`

	Runs    int           `json:"runs"`
	Elapsed time.Duration `json:"elapsed_ns"`
	Ops     int64         `json:"ops"`              // lock+unlock pairs (scenarios 1, 2, 5), grants (3, 4) or read grants (8, 8s, 9)
	Writes  int64         `json:"writes,omitempty"` // write grants (8, 8s, 9)
	// Commands the server(s) ran during the runs (INFO commandstats
	// deltas), -1 when unknown (miniredis).
	Commands int64 `json:"commands"`
	// Commands the clients sent (counted by a client hook), script calls
	// counting as one: the requests a lock makes.
	Requests int64 `json:"requests"`

	GiveUps    int64  `json:"give_ups"`   // Lock calls that gave up and were called again
	Violations int64  `json:"violations"` // two holders inside the critical section at once
	Errors     int64  `json:"errors"`
	FirstError string `json:"first_error,omitempty"`

	// Scenario 3/4.
	Handoffs       int64 `json:"handoffs"`       // grants to another goroutine than the previous holder
	EarlyHandoffs  int64 `json:"early_handoffs"` // of those, granted before the releaser's Unlock returned
	Censored       int64 `json:"censored_waits"` // Lock calls still waiting at the end (counted as waits up to the end)
	FIFOViolations int64 `json:"fifo_violations"`

	lat, wait, handoff, handoffEnd []time.Duration

	// Summaries, filled by finish.
	OpsPerSec   float64   `json:"ops_per_sec"`
	CmdsPerOp   float64   `json:"cmds_per_op"` // -1 when unknown
	ReqsPerOp   float64   `json:"requests_per_op"`
	Lat         *quantile `json:"latency,omitempty"`
	Wait        *quantile `json:"wait,omitempty"`
	Handoff     *quantile `json:"handoff_from_unlock_call,omitempty"`
	HandoffEnd  *quantile `json:"handoff_from_unlock_return,omitempty"`
	HandoffPart float64   `json:"handoff_share"`

	// Scenario 6/7 and other one-off figures.
	Figures map[string]float64 `json:"figures,omitempty"`
	Note    string             `json:"note,omitempty"`
}

type quantile struct {
	N   int           `json:"n"`
	P50 time.Duration `json:"p50_ns"`
	P90 time.Duration `json:"p90_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
}

func quantiles(s []time.Duration) *quantile {
	if len(s) == 0 {
		return nil
	}
	s = slices.Clone(s)
	slices.Sort(s)
	at := func(p float64) time.Duration {
		// nearest rank
		i := int(p*float64(len(s))+0.999999) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return &quantile{N: len(s), P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: s[len(s)-1]}
}

// add merges one run's measurements into r.
func (r *result) add(o *result) {
	r.Runs++
	r.Elapsed += o.Elapsed
	r.Ops += o.Ops
	r.Writes += o.Writes
	if r.Commands >= 0 && o.Commands >= 0 {
		r.Commands += o.Commands
	} else {
		r.Commands = -1
	}
	r.Requests += o.Requests
	r.GiveUps += o.GiveUps
	r.Violations += o.Violations
	r.Errors += o.Errors
	if r.FirstError == "" {
		r.FirstError = o.FirstError
	}
	r.Handoffs += o.Handoffs
	r.EarlyHandoffs += o.EarlyHandoffs
	r.Censored += o.Censored
	r.FIFOViolations += o.FIFOViolations
	r.lat = append(r.lat, o.lat...)
	r.wait = append(r.wait, o.wait...)
	r.handoff = append(r.handoff, o.handoff...)
	r.handoffEnd = append(r.handoffEnd, o.handoffEnd...)
	for k, v := range o.Figures {
		if r.Figures == nil {
			r.Figures = map[string]float64{}
		}
		// Figures named *_total add up over the rounds, *_max keep the
		// largest; the others are the last round's.
		switch old, ok := r.Figures[k]; {
		case ok && strings.HasSuffix(k, "_total"):
			v += old
		case ok && strings.HasSuffix(k, "_max"):
			v = max(v, old)
		}
		r.Figures[k] = v
	}
	if o.Note != "" {
		r.Note = o.Note
	}
}

func (r *result) finish() {
	if r.Elapsed > 0 {
		r.OpsPerSec = float64(r.Ops) / r.Elapsed.Seconds()
	}
	r.CmdsPerOp = -1
	if r.Commands >= 0 && r.Ops > 0 {
		r.CmdsPerOp = float64(r.Commands) / float64(r.Ops)
	}
	if r.Ops > 0 {
		r.ReqsPerOp = float64(r.Requests) / float64(r.Ops)
	}
	r.Lat = quantiles(r.lat)
	r.Wait = quantiles(r.wait)
	r.Handoff = quantiles(r.handoff)
	r.HandoffEnd = quantiles(r.handoffEnd)
	if r.Ops > 0 {
		r.HandoffPart = float64(r.Handoffs) / float64(r.Ops)
	}
}
