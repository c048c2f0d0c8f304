package main

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// scenarioHelp is each scenario's short name and what it measures, for -h.
// A scenario missing here is listed with its title.
var scenarioHelp = map[string][2]string{
	"1":   {"uncontended", "one goroutine, lock+unlock on one key: p50, p99, ops/s, requests and server commands per op"},
	"2":   {"parallel", "goroutines on as many keys through one client (-parallel): lock+unlock pairs/s"},
	"3":   {"contended", "16 goroutines over 4 clients on one key, busy 1 ms section: grants/s, handoffs, wait p99, commands per grant"},
	"3s":  {"contended-sleeping", "as 3 with a sleeping (I/O-like) section"},
	"4":   {"fair", "as 3 for the FIFO locks, with a FIFO check"},
	"5":   {"redlock", "RedLock over 5 nodes against single-node locks, uncontended: p50"},
	"6":   {"watchdog", "10,000 locks held by one client's watchdog: renewal round trips per tick, heap per lock (rlock only)"},
	"6c":  {"watchdog-cluster", "100,000 locks on a 3-master cluster with replicas: the same (needs redis-cli)"},
	"7":   {"waiters", "10,000 blocked Lock calls on 1,000 locks: heap per waiter, time to wake them all (rlock only)"},
	"8":   {"rw-read-heavy", "read-write lock, 95% reads, busy section: reads/s against the reentrant lock"},
	"8s":  {"rw-read-heavy-sleeping", "as 8 with a sleeping section"},
	"9":   {"rw-write-heavy", "read-write lock, 50% reads, busy section: reads/s and writer wait"},
	"10":  {"rw-writers", "read-write lock's write side as a mutex, as 3: wait p99, handoffs, commands per grant against the reentrant lock"},
	"10u": {"rw-uncontended", "read-write lock, one goroutine, lock+unlock of each side: p50 and server commands against the reentrant lock and the floor"},
}

// writeScenarioList writes one line per scenario: its ID, short name and
// what it measures.
func writeScenarioList(w io.Writer) {
	fmt.Fprintln(w, "Scenarios (-scenarios takes their IDs, comma-separated; the default runs them all):")
	for _, sc := range scenarios() {
		short, what := "", sc.title
		if h, ok := scenarioHelp[sc.id]; ok {
			short, what = h[0], h[1]
		}
		fmt.Fprintf(w, "  %-4s %-24s %s\n", sc.id, short, what)
	}
	fmt.Fprintln(w)
}

// allScenarioIDs is the default of -scenarios: every scenario.
func allScenarioIDs() string {
	var ids []string
	for _, sc := range scenarios() {
		ids = append(ids, sc.id)
	}
	return strings.Join(ids, ",")
}

// cpuList matches a taskset -c CPU list: 0, 0,1, 0-3, 0,2-3.
var cpuList = regexp.MustCompile(`^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$`)

// pinFlag is -pin: a CPU list to run client and servers on (taskset -c
// LIST). -pin alone means CPU 0; -pin LIST and -pin=LIST take a list.
type pinFlag struct{ cpus *string }

func (p pinFlag) String() string {
	if p.cpus == nil {
		return ""
	}
	return *p.cpus
}

func (p pinFlag) Set(v string) error {
	switch v {
	case "true":
		v = "0"
	case "false":
		v = ""
	}
	if v != "" && !cpuList.MatchString(v) {
		return errors.New("want a CPU list such as 0, 0,1 or 0-3")
	}
	*p.cpus = v
	return nil
}

// IsBoolFlag lets -pin stand alone (CPU 0).
func (pinFlag) IsBoolFlag() bool { return true }

// joinPinArg turns "-pin LIST" (two arguments) into "-pin=LIST", since a
// flag that may stand alone takes its value only after "=".
func joinPinArg(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if (a == "-pin" || a == "--pin") && i+1 < len(args) && cpuList.MatchString(args[i+1]) {
			out = append(out, a+"="+args[i+1])
			i++
			continue
		}
		out = append(out, a)
	}
	return out
}
