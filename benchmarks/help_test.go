package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
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
