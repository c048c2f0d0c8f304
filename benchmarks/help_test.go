package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

// TestHelpNamesEveryScenario: -h lists every scenario with its ID and a
// short name.
func TestHelpNamesEveryScenario(t *testing.T) {
	var out bytes.Buffer
	if _, err := parseFlags([]string{"-h"}, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	help := out.String()
	for _, sc := range scenarios() {
		h, ok := scenarioHelp[sc.id]
		if !ok {
			t.Errorf("scenario %s has no short name in scenarioHelp", sc.id)
			continue
		}
		if !strings.Contains(help, "  "+sc.id+" ") || !strings.Contains(help, h[0]) {
			t.Errorf("-h does not list scenario %s (%s):\n%s", sc.id, h[0], help)
		}
	}
}

// TestPinTakesACPUList: -pin alone is CPU 0; -pin LIST and -pin=LIST take
// a taskset CPU list; anything else is refused.
func TestPinTakesACPUList(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"-pin"}, "0"},
		{[]string{"-pin", "-rounds=1"}, "0"},
		{[]string{"-pin", "0"}, "0"},
		{[]string{"-pin", "0,1"}, "0,1"},
		{[]string{"-pin=1"}, "1"},
		{[]string{"--pin", "0-3"}, "0-3"},
		{[]string{"-pin=0,2-3", "-rounds=1"}, "0,2-3"},
	} {
		o, err := parseFlags(c.args, io.Discard)
		if err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		if o.pin != c.want {
			t.Errorf("%q: pin %q, want %q", c.args, o.pin, c.want)
		}
	}
	for _, bad := range [][]string{{"-pin=x"}, {"-pin=0,"}, {"-pin", "one"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

// TestSummaryFromCommittedResults: -summary renders the committed results'
// headline table, with a ratio against the floor.
func TestSummaryFromCommittedResults(t *testing.T) {
	var rep report
	rep.Results = []*result{
		{Scenario: "1", Contender: "floor (SET NX PX + compare-and-delete, retry 1 ms)", Library: "floor", Lat: &quantile{P50: 100 * time.Microsecond}},
		{Scenario: "1", Contender: "rlock (reentrant)", Library: "rlock", Lat: &quantile{P50: 110 * time.Microsecond}},
		{Scenario: "11", Contender: "floor (GET/DECRBY script + INCRBY, retry 1 ms)", Library: "floor", Lat: &quantile{P50: 50 * time.Microsecond}},
		{Scenario: "11", Contender: "rlock (semaphore.New)", Library: "rlock", Lat: &quantile{P50: 100 * time.Microsecond}},
	}
	s := summary(&rep)
	for _, want := range []string{"| 1 | uncontended lock+unlock, p50 | 100 µs (1.00×) | 110 µs (1.10×) |", "| 11 | semaphore acquire+release, p50 | 50 µs (1.00×) | 100 µs (2.00×) |"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
}
