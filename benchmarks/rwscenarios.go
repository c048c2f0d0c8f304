package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/rlock-go/rlock/reentrant"
	"github.com/rlock-go/rlock/rwlock"
)

// Scenarios 8, 8s and 9: a read-write workload on one key, 16 goroutines
// over 4 clients, each goroutine choosing a read or a write at random for
// every critical section, with rlock's read-write lock and with rlock's
// reentrant lock used for everything (reads and writes alike). A result's
// Ops are its reads (so ops/s is reads per second), Writes its writes, lat
// its read Lock calls' waits and wait its write Lock calls' waits.

// rwScenarios are the read-write scenarios, for the scenario list.
func rwScenarios() []scenario {
	return []scenario{
		{id: "8", title: "Read-heavy: 95% reads, 5% writes, 16 goroutines over 4 clients on one key, busy section (rlock rwlock vs reentrant)", contenders: rwContenders, run: runReadWrite},
		{id: "8s", title: "Read-heavy: 95% reads, 5% writes, 16 goroutines over 4 clients on one key, sleeping section (rlock rwlock vs reentrant)", contenders: rwContenders, run: runReadWrite},
		{id: "9", title: "Write-heavy: 50% reads, 50% writes, 16 goroutines over 4 clients on one key, busy section (rlock rwlock vs reentrant)", contenders: rwContenders, run: runReadWrite},
		{id: "10", title: "Write side as a mutex: writers only, 16 goroutines over 4 clients on one key, busy section (rlock rwlock write lock vs reentrant)", contenders: rwWriteContenders, run: runContended},
		{id: "10u", title: "Read-write lock uncontended: lock+unlock of one side, one goroutine (rlock rwlock vs reentrant)", contenders: rwUncontendedContenders, run: runUncontended},
	}
}

// tableOf returns the scenario whose table shape scenario sc's results
// take: scenario 10 is scenario 3's contended handoff with the write
// side, scenario 10u scenario 1's uncontended lock+unlock with either side.
func tableOf(sc string) string {
	switch sc {
	case "10":
		return "3"
	case "10u":
		return "1"
	}
	return sc
}

// rwWriteContenders: the floor, the reentrant lock and the read-write
// lock's write side used as a mutex (scenario 10).
func rwWriteContenders(*bench) []contender {
	return []contender{
		{name: "floor", config: "SET NX PX + compare-and-delete, retry 1 ms", open: openFloor},
		{name: "rlock", config: "reentrant", open: openRlock},
		{name: "rlock", config: "rwlock write side", open: openRlockSide(true)},
	}
}

// rwUncontendedContenders: scenario 10's and the read side (scenario 10u).
func rwUncontendedContenders(b *bench) []contender {
	return append(rwWriteContenders(b), contender{name: "rlock", config: "rwlock read side", open: openRlockSide(false)})
}

// openRlockSide opens an rlock client whose mutexes are one side of a
// read-write lock handle (a new owner each).
func openRlockSide(write bool) func(context.Context, []string, *runStats) (process, error) {
	return func(_ context.Context, addrs []string, st *runStats) (process, error) {
		p, err := openRlockWith(addrs[0], st)
		if err != nil {
			return nil, err
		}
		return &rlockSideProcess{p, write}, nil
	}
}

type rlockSideProcess struct {
	*rlockProcess
	write bool
}

func (p *rlockSideProcess) mutex(name string) (mutex, error) {
	read, write, err := (&rlockRWProcess{p.rlockProcess}).rwMutexes(name)
	if p.write {
		return write, err
	}
	return read, err
}

// rwShape is what a read-write scenario runs: the share of reads, and
// whether the critical section sleeps (like I/O) or spins (like work).
type rwShape struct {
	readPercent int
	sleep       bool
}

func rwShapeOf(sc string) rwShape {
	switch sc {
	case "8":
		return rwShape{readPercent: 95}
	case "8s":
		return rwShape{readPercent: 95, sleep: true}
	}
	return rwShape{readPercent: 50}
}

// isRWScenario reports whether sc is a read-write scenario (its table).
func isRWScenario(sc string) bool { return sc == "8" || sc == "8s" || sc == "9" }

const rwReentrantConfig = "reentrant lock for reads and writes"

func rwContenders(*bench) []contender {
	return []contender{
		{name: "rlock", config: "rwlock", open: openRlockRW},
		{name: "rlock", config: rwReentrantConfig, open: openRlockRW},
	}
}

// rlockRWProcess serves both contenders: the read-write lock, and the
// reentrant lock as both sides.
type rlockRWProcess struct{ *rlockProcess }

func openRlockRW(_ context.Context, addrs []string, st *runStats) (process, error) {
	p, err := openRlockWith(addrs[0], st)
	if err != nil {
		return nil, err
	}
	return &rlockRWProcess{p}, nil
}

// rwMutexes returns the two sides of a new read-write lock handle (a new
// owner).
func (p *rlockRWProcess) rwMutexes(name string) (read, write mutex, err error) {
	l, err := rwlock.New(p.c, name)
	if err != nil {
		return nil, nil, err
	}
	return &rlockMutex{l.ReadLock()}, &rlockMutex{l.WriteLock()}, nil
}

// reentrantMutexes returns one reentrant handle (a new owner) as both
// sides.
func (p *rlockRWProcess) reentrantMutexes(name string) (read, write mutex, err error) {
	l, err := reentrant.New(p.c, name)
	if err != nil {
		return nil, nil, err
	}
	m := &rlockMutex{l}
	return m, m, nil
}

// rwCheck counts readers and writers inside their critical sections and
// the times a reader met a writer or two writers met.
type rwCheck struct {
	mu         sync.Mutex
	readers    int
	writers    int
	violations int64
}

func (c *rwCheck) enter(write bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.writers > 0 || write && c.readers > 0 {
		c.violations++
	}
	if write {
		c.writers++
	} else {
		c.readers++
	}
}

func (c *rwCheck) leave(write bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if write {
		c.writers--
	} else {
		c.readers--
	}
}

// runReadWrite: 16 goroutines over 4 clients on one key, each choosing a
// read (the scenario's share) or a write for every critical section of
// b.section, and calling Lock again at once (scenarios 8, 8s and 9).
func runReadWrite(ctx context.Context, b *bench, sc string, c contender) *result {
	r := newResult(sc, c, 1)
	shape := rwShapeOf(sc)
	st := &runStats{}
	procs := make([]*rlockRWProcess, contendedClients)
	defer func() {
		for _, p := range procs {
			if p != nil {
				r.fail(p.close())
			}
		}
	}()
	name := keyName(sc, "rw")
	type sides struct{ read, write mutex }
	hs := make([]sides, contendedGoroutines)
	for i := range procs {
		p, err := c.open(ctx, addrs(b.nodes[:1]), st)
		if err != nil {
			r.fail(err)
			return r
		}
		procs[i] = p.(*rlockRWProcess)
	}
	for g := range hs {
		p := procs[g%contendedClients]
		get := p.rwMutexes
		if c.config == rwReentrantConfig {
			get = p.reentrantMutexes
		}
		rm, wm, err := get(name)
		if err == nil {
			err = warmUp(ctx, wm)
		}
		if err == nil && rm != wm {
			err = warmUp(ctx, rm)
		}
		if err != nil {
			r.fail(err)
			return r
		}
		hs[g] = sides{rm, wm}
	}

	var (
		mu     sync.Mutex // guards r and end
		end    time.Time
		check  rwCheck
		reads  int64
		writes int64
	)
	cmds := startCommands(ctx, b.nodes[:1])
	req0 := st.requests.Load()
	runCtx, cancel := context.WithCancel(ctx)
	start := time.Now()
	stop := time.AfterFunc(b.duration, func() {
		mu.Lock()
		end = time.Now()
		mu.Unlock()
		cancel()
	})
	defer stop.Stop()
	var wg sync.WaitGroup
	for g, h := range hs {
		rng := rand.New(rand.NewPCG(uint64(g), uint64(start.UnixNano())))
		wg.Go(func() {
			for runCtx.Err() == nil {
				write := rng.IntN(100) >= shape.readPercent
				m := h.read
				if write {
					m = h.write
				}
				call := time.Now()
				err := m.lock(runCtx)
				now := time.Now()
				mu.Lock()
				waits := &r.lat
				if write {
					waits = &r.wait
				}
				if err != nil {
					if runCtx.Err() != nil {
						if write { // a writer still waiting at the end: a wait of at least this long
							*waits = append(*waits, end.Sub(call))
							r.Censored++
						}
					} else {
						r.fail(fmt.Errorf("lock: %w", err))
					}
					mu.Unlock()
					return
				}
				*waits = append(*waits, now.Sub(call))
				if write {
					writes++
				} else {
					reads++
				}
				mu.Unlock()

				check.enter(write)
				if shape.sleep {
					time.Sleep(b.section)
				} else {
					spin(b.section)
				}
				check.leave(write)

				uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				err = m.unlock(uctx)
				ucancel()
				if err != nil {
					mu.Lock()
					r.fail(fmt.Errorf("unlock: %w", err))
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	r.Elapsed = time.Since(start)
	r.Ops, r.Writes = reads, writes
	r.Violations = check.violations
	var err error
	r.Commands, err = cmds.stop(ctx)
	r.fail(err)
	r.GiveUps = st.giveUps.Load()
	r.Requests = st.requests.Load() - req0
	return r
}

// rwTable writes the table of a read-write scenario: reads per second
// against the reentrant lock's in the same run, and writer wait.
func rwTable(w *strings.Builder, rep *report, sc string, rs []*result) {
	shape := rwShapeOf(sc)
	section := "busy (spinning)"
	if shape.sleep {
		section = "sleeping"
	}
	fmt.Fprintf(w, "%d%% reads, %d%% writes; 16 goroutines over 4 clients on one key, each calling Lock again at once; a %s %s critical section. Reads/s counts granted read Lock calls; wait is one Lock call (writers still waiting at the end count up to the end). The reentrant lock serves reads and writes alike.\n\n",
		shape.readPercent, 100-shape.readPercent, rep.Settings["section"], section)
	var base *result
	for _, r := range rs {
		if r.Config == rwReentrantConfig {
			base = r
		}
	}
	w.WriteString("| contender | reads/s | reads/s vs reentrant | writes/s | read wait p50 | read wait p99 | writer wait p50 | writer wait p99 | requests/op | exclusion | notes |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		var ro float64
		if base != nil {
			ro = ratio(r.OpsPerSec, base.OpsPerSec)
		}
		var writesPerSec, reqs float64
		if r.Elapsed > 0 {
			writesPerSec = float64(r.Writes) / r.Elapsed.Seconds()
		}
		if n := r.Ops + r.Writes; n > 0 {
			reqs = float64(r.Requests) / float64(n)
		}
		mx := "held"
		if r.Violations > 0 {
			mx = fmt.Sprintf("**VIOLATED %d×**", r.Violations)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Contender, fmtRate(r.OpsPerSec), fmtRatio(ro),
			fmtRate(writesPerSec), q(r.Lat, p50), q(r.Lat, p99), q(r.Wait, p50), q(r.Wait, p99), fmtCmds(reqs), mx, notes(r))
	}
}
