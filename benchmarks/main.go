// Command benchmarks compares rlock with the Go peers (redsync,
// bsm/redislock, rueidislock) and with the floor — SET NX PX plus a
// compare-and-delete script, the least work a Redis lock can do — in one
// run, interleaved, on redis-server processes it starts itself on free
// loopback ports (miniredis when redis-server is missing).
//
// Run it from this directory:
//
//	go run .                      # client and servers where the OS puts them
//	go run . -pin 0               # everything on CPU 0 (re-executes under taskset -c 0)
//	go run . -pin 0,1             # everything on CPUs 0 and 1 (taskset -c 0,1)
//	go run . -out results         # also update the committed results
//	go run . -h                   # the scenarios and the flags
//
// It prints a markdown table. Only with -out DIR does it write
// results-<placement>.json, .md and chart-<placement>.svg into DIR, so a
// plain run never overwrites the committed results in results/.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

// pinnedEnv marks the child process re-executed under taskset by -pin; it
// holds the CPU list.
const pinnedEnv = "RLOCK_BENCH_PINNED"

type options struct {
	scenarios     string
	duration      time.Duration
	rounds        int
	section       time.Duration
	parallel      int
	watchdogLocks int
	clusterLocks  int
	watchdogLease time.Duration
	waiters       int
	waiterLocks   int
	waiterClients int
	out           string
	pin           string // CPU list for taskset -c; empty: not pinned
	mini          bool
	only          string
	decay         int
	summary       string
}

const usageHeader = `Usage: go run . [flags]   (in rlock's benchmarks/ directory)

Compares rlock with the Go peers (redsync, bsm/redislock, rueidislock) and
with the floor, SET NX PX plus a compare-and-delete script, the least work a
Redis lock can do; rlock's read-write lock with its reentrant lock; and
rlock's semaphores and latch with their floors. Every scenario runs every contender
in one run, interleaved over rounds, on redis-server processes it starts
itself on free loopback ports (miniredis, with a note, when redis-server is
missing). A full run takes several minutes.

It prints a markdown table of every figure as a ratio to the floor measured
in the same run. Files are written only with -out: -out results updates the
committed results (results-<placement>.json and .md, chart-<placement>.svg;
<placement> is unpinned, one-cpu with -pin 0, or cpus-<list> with a longer
-pin list). -pin 0 and -pin are the same: everything on CPU 0.

`

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case err != nil:
		os.Exit(2)
	}
	if o.summary != "" {
		if err := printSummary(o.summary); err != nil {
			fmt.Fprintln(os.Stderr, "benchmarks:", err)
			os.Exit(1)
		}
		return
	}
	if o.pin != "" && os.Getenv(pinnedEnv) == "" {
		os.Exit(reexecPinned(o.pin))
	}
	// Ctrl-C ends the run early; the servers are still stopped.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	runMain := run
	if o.decay > 0 {
		runMain = func(ctx context.Context, o options, stdout, _ io.Writer) error { return runDecay(ctx, o.decay, stdout) }
	}
	if err := runMain(ctx, o, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "benchmarks:", err)
		stop()
		os.Exit(1)
	}
}

// parseFlags parses the command line; -h prints the usage header and the
// flags on output and returns flag.ErrHelp.
func parseFlags(args []string, output io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("benchmarks", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.Usage = func() {
		fmt.Fprint(output, usageHeader)
		writeScenarioList(output)
		fmt.Fprintln(output, "Flags:")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.scenarios, "scenarios", allScenarioIDs(), "comma-separated scenarios to run (listed above)")
	fs.DurationVar(&o.duration, "duration", 2*time.Second, "measuring time per contender, scenario and round")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds: every round runs every contender of every scenario once, in a rotating order")
	fs.DurationVar(&o.section, "section", time.Millisecond, "critical section of the contended scenarios (busy work)")
	fs.IntVar(&o.parallel, "parallel", 64, "goroutines (each on its own key) of scenario 2")
	fs.IntVar(&o.watchdogLocks, "watchdog-locks", 10000, "locks held at once in scenario 6")
	fs.IntVar(&o.clusterLocks, "cluster-locks", 100000, "locks held at once in scenario 6c (3+3 cluster)")
	fs.DurationVar(&o.watchdogLease, "watchdog-lease", 3*time.Second, "watchdog lease of scenarios 6 and 6c, renewed every third of it")
	fs.IntVar(&o.waiters, "waiters", 10000, "blocked Lock calls in scenario 7")
	fs.IntVar(&o.waiterLocks, "waiter-locks", 1000, "locks the waiters of scenario 7 wait for")
	fs.IntVar(&o.waiterClients, "waiter-clients", 1, "clients (processes) the waiters of scenario 7 are spread over")
	fs.StringVar(&o.out, "out", "", "directory to write the JSON, markdown and SVG files into, e.g. results (the committed ones); default: none, the table is only printed")
	fs.Var(pinFlag{&o.pin}, "pin", "run client and servers on these CPUs only, a taskset -c `list` (-pin 0, -pin 0,1, -pin 0-3; -pin alone: CPU 0); re-executes under taskset")
	fs.BoolVar(&o.mini, "miniredis", false, "use embedded miniredis instead of redis-server (figures dominated by miniredis)")
	fs.StringVar(&o.only, "only", "", "run only contenders whose label contains this text (the floor always runs)")
	fs.IntVar(&o.decay, "decay", 0, "instead of the scenarios: run this many lock+unlock cycles of the floor, rlock (one handle; a handle per operation; an owner per operation) and the exactly-once Redisson-layout floor on embedded miniredis (real-time TTLs), interleaved, and print the rate per tenth and the keys left")
	fs.StringVar(&o.summary, "summary", "", "instead of the scenarios: print the summary table (docs/benchmarks.md's) of this results JSON, e.g. results/results-one-cpu.json")
	if err := fs.Parse(joinPinArg(args)); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(output, "benchmarks: unexpected argument %q (flags only; -h lists them)\n", fs.Arg(0))
		return o, errors.New("unexpected argument")
	}
	return o, nil
}

// reexecPinned runs this program again under taskset -c cpus, so that the
// client and the redis-server processes it starts share those CPUs.
func reexecPinned(cpus string) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchmarks: -pin:", err)
		return 1
	}
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchmarks: -pin needs taskset (util-linux):", err)
		return 1
	}
	cmd := exec.Command(taskset, append([]string{"-c", cpus, self}, os.Args[1:]...)...)
	cmd.Env = append(os.Environ(), pinnedEnv+"="+cpus)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		fmt.Fprintln(os.Stderr, "benchmarks: -pin:", err)
		return 1
	}
	return 0
}

// report is everything one run measured, as written to results-*.json.
type report struct {
	Time      time.Time         `json:"time"`
	Command   string            `json:"command"`
	Machine   machine           `json:"machine"`
	Settings  map[string]string `json:"settings"`
	Results   []*result         `json:"results"`
	Skipped   map[string]string `json:"skipped,omitempty"`
	Titles    map[string]string `json:"titles"`
	Order     []string          `json:"order"`
	TotalTime time.Duration     `json:"total_time_ns"`
}

type machine struct {
	CPU        string `json:"cpu"`
	NumCPU     int    `json:"num_cpu"`     // CPUs of the machine
	UsableCPUs int    `json:"usable_cpus"` // CPUs this process may run on
	GOMAXPROCS int    `json:"gomaxprocs"`
	Go         string `json:"go"`
	Kernel     string `json:"kernel"`
	Server     string `json:"server"` // "redis-server 7.0.15" or "miniredis"
	Placement  string `json:"placement"`
	ClientCPUs string `json:"client_cpus"`
	ServerCPUs string `json:"server_cpus"`
	Tag        string `json:"tag"` // "one-cpu" or "unpinned": the output file suffix
}

func run(ctx context.Context, o options, stdout, stderr io.Writer) error {
	began := time.Now()
	want := map[string]bool{}
	for s := range strings.SplitSeq(o.scenarios, ",") {
		if s = strings.TrimSpace(s); s != "" {
			want[s] = true
		}
	}
	var scs []scenario
	for _, sc := range scenarios() {
		if want[sc.id] {
			scs = append(scs, sc)
			delete(want, sc.id)
		}
	}
	if len(want) > 0 || len(scs) == 0 {
		return fmt.Errorf("-scenarios %q: choose from %s (go run . -h lists them)", o.scenarios, allScenarioIDs())
	}
	if o.rounds < 1 || o.duration <= 0 || o.parallel < 1 || o.watchdogLocks < 1 || o.clusterLocks < 1 || o.waiters < 1 || o.waiterLocks < 1 || o.watchdogLease < 3*time.Millisecond {
		return errors.New("-rounds, -duration, -parallel, -watchdog-locks, -cluster-locks, -waiters and -waiter-locks must be positive, -watchdog-lease at least 3ms")
	}

	mini := o.mini
	note := ""
	if !mini {
		if _, err := exec.LookPath("redis-server"); err != nil {
			mini = true
			note = "redis-server not found on PATH: running on miniredis, whose figures are dominated by miniredis itself (install redis-server for real numbers)"
			fmt.Fprintln(stderr, "benchmarks: NOTE:", note)
		}
	}
	nNodes := 1
	for _, sc := range scs {
		if sc.id == "5" {
			nNodes = 5
		}
	}
	nodes, err := startNodes(nNodes, mini)
	if err != nil {
		return err
	}
	defer stopNodes(nodes)
	b := &bench{
		nodes: nodes, mini: mini, duration: o.duration, section: o.section, parallel: o.parallel,
		watchdogLocks: o.watchdogLocks, watchdogLease: o.watchdogLease, waiters: o.waiters, waiterLocks: o.waiterLocks, waiterClients: o.waiterClients,
		clusterLocks: o.clusterLocks,
	}
	clusterNote := ""
	for _, sc := range scs {
		if !sc.cluster {
			continue
		}
		if mini {
			clusterNote = "needs redis-server and redis-cli (a 3+3 cluster); not run on miniredis"
			break
		}
		if b.cluster, err = startCluster(ctx); err != nil {
			clusterNote = "the 3+3 cluster did not start: " + err.Error()
			fmt.Fprintln(stderr, "benchmarks: NOTE:", clusterNote)
		}
		defer b.cluster.stop()
		break
	}
	rep := &report{
		Time:    began.UTC(),
		Command: commandLine(),
		Machine: describeMachine(ctx, nodes, mini),
		Settings: map[string]string{
			"duration": o.duration.String(), "rounds": fmt.Sprint(o.rounds), "section": o.section.String(),
			"parallel": fmt.Sprint(o.parallel), "watchdog_locks": fmt.Sprint(o.watchdogLocks), "watchdog_lease": o.watchdogLease.String(),
			"waiters": fmt.Sprint(o.waiters), "waiter_locks": fmt.Sprint(o.waiterLocks), "waiter_clients": fmt.Sprint(o.waiterClients), "cluster_locks": fmt.Sprint(o.clusterLocks), "note": note,
		},
		Skipped: map[string]string{},
		Titles:  map[string]string{"rtt": "One Redis round trip (PING)"},
		Order:   []string{"rtt"},
	}

	// Plan: every round runs the PING reference, then every scenario with
	// every contender, the contenders in an order rotated by the round.
	type step struct {
		sc scenario
		c  contender
	}
	var plan [][]step
	for round := range o.rounds {
		var steps []step
		for _, sc := range scs {
			if sc.once && round != o.rounds-1 || sc.cluster && b.cluster == nil {
				continue
			}
			cs := filter(sc.contenders(b), o.only, mini)
			if len(cs) == 0 {
				continue
			}
			k := round % len(cs)
			for _, c := range append(cs[k:], cs[:k]...) {
				steps = append(steps, step{sc, c})
			}
		}
		plan = append(plan, steps)
	}
	for _, sc := range scs {
		rep.Titles[sc.id] = sc.title
		rep.Order = append(rep.Order, sc.id)
		for _, c := range sc.contenders(b) {
			if mini && c.realOnly != "" && !sc.once {
				rep.Skipped[sc.id] = "skipped on miniredis: " + c.realOnly
			}
		}
		if len(filter(sc.contenders(b), o.only, mini)) == 0 {
			rep.Skipped[sc.id] = "no contender for this scenario yet"
		}
		if sc.cluster && b.cluster == nil {
			rep.Skipped[sc.id] = clusterNote
		}
	}

	total := 0
	for _, steps := range plan {
		total += 1 + len(steps)
	}
	prog := newProgress(stderr, total)
	agg := map[string]*result{}
	var keys []string
	merge := func(r *result) {
		k := r.Scenario + "\x00" + r.Contender
		a := agg[k]
		if a == nil {
			a = &result{Scenario: r.Scenario, Contender: r.Contender, Library: r.Library, Config: r.Config, Nodes: r.Nodes}
			agg[k] = a
			keys = append(keys, k)
		}
		a.add(r)
	}
	for round, steps := range plan {
		if ctx.Err() != nil {
			break
		}
		prog.step(fmt.Sprintf("round %d/%d · PING round trip", round+1, o.rounds))
		merge(runPing(ctx, b))
		for _, s := range steps {
			if ctx.Err() != nil {
				return fmt.Errorf("interrupted: %w", ctx.Err())
			}
			prog.step(fmt.Sprintf("round %d/%d · scenario %s · %s", round+1, o.rounds, s.sc.id, s.c.label()))
			// A bound on every step, so that a contender that hangs shows
			// up as an error instead of stopping the run.
			sctx, cancel := context.WithTimeout(ctx, b.duration+3*time.Minute)
			merge(s.sc.run(sctx, b, s.sc.id, s.c))
			cancel()
		}
	}
	prog.done()
	for _, k := range keys {
		agg[k].finish()
		rep.Results = append(rep.Results, agg[k])
	}
	rep.TotalTime = time.Since(began)

	table := markdown(rep)
	fmt.Fprint(stdout, table)
	if o.out == "" {
		fmt.Fprintf(stderr, "benchmarks: done in %v; no files written (-out results would update the committed results)\n", rep.TotalTime.Round(time.Second))
		return nil
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	tag := rep.Machine.Tag
	files := map[string][]byte{
		"results-" + tag + ".json": append(js, '\n'),
		"results-" + tag + ".md":   []byte(table),
		"chart-" + tag + ".svg":    []byte(chart(rep)),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(o.out, name), data, 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "benchmarks: wrote %s/{results-%s.json,results-%s.md,chart-%s.svg} in %v\n", o.out, tag, tag, tag, rep.TotalTime.Round(time.Second))
	return nil
}

func filter(cs []contender, only string, mini bool) []contender {
	var out []contender
	for _, c := range cs {
		if mini && c.realOnly != "" {
			continue
		}
		if only == "" || c.name == "floor" || strings.Contains(c.label(), only) {
			out = append(out, c)
		}
	}
	return out
}

func commandLine() string {
	args := append([]string{"go run ."}, os.Args[1:]...)
	if cpus := os.Getenv(pinnedEnv); cpus != "" && !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(strings.TrimLeft(a, "-"), "pin") }) {
		args = append(args, "-pin="+cpus)
	}
	return strings.Join(args, " ")
}

func describeMachine(ctx context.Context, nodes []*node, mini bool) machine {
	m := machine{
		NumCPU: runtime.NumCPU(), UsableCPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Go: runtime.Version(),
		ClientCPUs: cpusAllowed(os.Getpid()),
	}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPU = infoField(strings.ReplaceAll(string(data), "\t", ""), "model name")
		if n := strings.Count(string(data), "\nprocessor") + btoi(strings.HasPrefix(string(data), "processor")); n > 0 {
			m.NumCPU = n
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(data))
	}
	if mini {
		m.Server = "miniredis (embedded, in the benchmark process)"
		m.ServerCPUs = m.ClientCPUs
	} else {
		info, err := nodes[0].admin.Info(ctx, "server").Result()
		if err == nil {
			m.Server = "redis-server " + infoField(info, "redis_version")
		}
		m.ServerCPUs = cpusAllowed(nodes[0].pid())
	}
	m.Tag = "unpinned"
	m.Placement = fmt.Sprintf("unpinned: client on CPUs %s, redis-server on CPUs %s (the OS places them)", m.ClientCPUs, m.ServerCPUs)
	oneCPU := m.ClientCPUs != "" && !strings.ContainsAny(m.ClientCPUs, ",-")
	switch cpus := os.Getenv(pinnedEnv); {
	case oneCPU:
		m.Tag = "one-cpu"
		m.Placement = fmt.Sprintf("pinned: client on CPU %s, redis-server on CPU %s (taskset)", m.ClientCPUs, m.ServerCPUs)
	case cpus != "":
		m.Tag = "cpus-" + strings.ReplaceAll(cpus, ",", "_")
		m.Placement = fmt.Sprintf("pinned: client on CPUs %s, redis-server on CPUs %s (taskset -c %s)", m.ClientCPUs, m.ServerCPUs, cpus)
	}
	return m
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// progress writes one line per step: rewritten in place on a terminal.
type progress struct {
	w     io.Writer
	tty   bool
	n     int
	total int
	start time.Time
}

func newProgress(w io.Writer, total int) *progress {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil {
			tty = st.Mode()&os.ModeCharDevice != 0
		}
	}
	return &progress{w: w, tty: tty, total: total, start: time.Now()}
}

func (p *progress) step(what string) {
	p.n++
	line := fmt.Sprintf("[%d/%d %s] %s", p.n, p.total, time.Since(p.start).Round(time.Second), what)
	if p.tty {
		fmt.Fprintf(p.w, "\r\x1b[K%s", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
}

func (p *progress) done() {
	if p.tty {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}
