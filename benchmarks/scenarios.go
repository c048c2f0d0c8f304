package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/rlock-go/rlock"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock/internal/lua"
	"github.com/rlock-go/rlock/reentrant"
)

// bench is the configuration and the servers of one comparison run.
type bench struct {
	nodes    []*node // nodes[0] serves the single-node scenarios
	mini     bool
	duration time.Duration // per contender, scenario and round
	section  time.Duration // critical section of scenarios 3 and 4
	parallel int           // goroutines (and keys) of scenario 2

	watchdogLocks int           // scenario 6
	watchdogLease time.Duration // scenarios 6 and 6c, renewed every third of it
	waiters       int           // scenario 7
	waiterLocks   int           // scenario 7
	waiterClients int           // scenario 7: clients the waiters are spread over

	cluster      *cluster // scenario 6c; nil when not run
	clusterLocks int      // scenario 6c
}

// scenario is one row group of the comparison.
type scenario struct {
	id         string
	title      string
	contenders func(b *bench) []contender
	run        func(ctx context.Context, b *bench, id string, c contender) *result
	once       bool // run once, after the interleaved rounds (scenarios 6, 6c, 7)
	cluster    bool // needs the 3+3 cluster (redis-server and redis-cli)
}

func scenarios() []scenario {
	return append([]scenario{
		{id: "1", title: "Uncontended lock+unlock, one goroutine", contenders: uncontended, run: runUncontended},
		{id: "2", title: "Parallel: goroutines on as many distinct keys, one client", contenders: parallel, run: runParallel},
		{id: "3", title: "Contended handoff: 16 goroutines over 4 clients on one key", contenders: single, run: runContended},
		{id: "3s", title: "Contended handoff, sleeping critical section (I/O-like): 16 goroutines over 4 clients on one key", contenders: single, run: runContended},
		{id: "4", title: "Fair lock handoff, FIFO check", contenders: fairOnly, run: runContended},
		{id: "5", title: "RedLock on 5 nodes vs single node, uncontended", contenders: multiNode, run: runUncontended},
		{id: "6", title: "Watchdog at scale (rlock)", contenders: rlockOnly, run: runWatchdogScale, once: true},
		{id: "6c", title: "Watchdog at scale on a 3-master cluster with replicas (rlock)", contenders: rlockOnly, run: runWatchdogCluster, once: true, cluster: true},
		{id: "7", title: "Waiters at scale (rlock)", contenders: rlockOnly, run: runWaitersScale, once: true},
	}, append(rwScenarios(), syncScenarios()...)...)
}

func single(*bench) []contender {
	return slices.DeleteFunc(singleNodeContenders(), func(c contender) bool { return !c.single })
}

// uncontended is single and rlock once more with a ctx that cannot end
// (scenario 1): the harness gives every Lock call a context.WithTimeout,
// and rlock then runs each attempt on its client's parked worker, so
// that Lock returns the moment ctx ends; issue 15 asks for both.
// The exactly-once floor runs once more with a lock that returns the
// moment ctx ends (promptFloor), which is what that promptness costs any
// lock on go-redis.
func uncontended(b *bench) []contender {
	return append(parallel(b), contender{name: "rlock", config: "reentrant, context.Background()", single: true, open: openRlockBackground})
}

// parallel is single and the exactly-once floor with a prompt lock
// (scenario 2).
func parallel(b *bench) []contender {
	cs := single(b)
	i := slices.IndexFunc(cs, func(c contender) bool { return c.name != "floor" && c.name != redissonFloorName })
	return slices.Insert(cs, max(i, 0), promptFloor)
}

func fairOnly(*bench) []contender {
	return slices.DeleteFunc(singleNodeContenders(), func(c contender) bool { return !c.fair })
}

func multiNode(b *bench) []contender {
	return slices.DeleteFunc(append(singleNodeContenders(), multiNodeContenders()...), func(c contender) bool {
		return c.nodes == 0 || c.nodes > len(b.nodes)
	})
}

func rlockOnly(*bench) []contender {
	return []contender{{name: "rlock", config: "reentrant", single: true, open: openRlock}}
}

// nodesFor returns the nodes a contender runs on in a scenario.
func (b *bench) nodesFor(sc string, c contender) []*node {
	if sc == "5" && c.nodes > 1 {
		return b.nodes[:c.nodes]
	}
	return b.nodes[:1]
}

func addrs(nodes []*node) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.addr)
	}
	return out
}

// keyName returns a lock name no other run uses.
func keyName(scenario, what string) string {
	return fmt.Sprintf("bench:%s:%s:%016x", scenario, what, rand.Uint64())
}

func newResult(sc string, c contender, nodes int) *result {
	return &result{Scenario: sc, Contender: c.label(), Library: c.name, Config: c.config, Nodes: nodes}
}

func (r *result) fail(err error) {
	if err == nil {
		return
	}
	r.Errors++
	if r.FirstError == "" {
		r.FirstError = err.Error()
	}
}

// commands measures the commands the nodes run between start and stop.
type commands struct {
	nodes []*node
	start int64
	err   error
}

func startCommands(ctx context.Context, nodes []*node) *commands {
	n, err := commandCallsAll(ctx, nodes)
	return &commands{nodes: nodes, start: n, err: err}
}

func (c *commands) stop(ctx context.Context) (int64, error) {
	if c.err != nil {
		return -1, c.err
	}
	n, err := commandCallsAll(ctx, c.nodes)
	if err != nil {
		return -1, err
	}
	if n < 0 || c.start < 0 {
		return -1, nil
	}
	return n - c.start, nil
}

// lockTimeout bounds one Lock call on a key nobody else holds (scenarios
// 1, 2, 5 and the warm-ups): a call still waiting after it is recorded as
// an error (a lost wake-up), instead of stopping the run. The smoke test
// shortens it.
var lockTimeout = 10 * time.Second

// lockFree locks m, a lock nobody else holds, within lockTimeout. On
// success it returns the cancel function of the context the lock was
// taken with, to call after unlock (rueidislock ties the holding to it).
func lockFree(ctx context.Context, m mutex) (context.CancelFunc, error) {
	lctx, cancel := context.WithTimeout(ctx, lockTimeout)
	err := m.lock(lctx)
	if err != nil {
		cancel()
		if ctx.Err() == nil && lctx.Err() != nil {
			return nil, fmt.Errorf("lock on a key nobody holds not acquired within %v: %w", lockTimeout, err)
		}
		return nil, err
	}
	return cancel, nil
}

// cycle locks and unlocks m, a lock nobody else holds.
func cycle(ctx context.Context, m mutex) error {
	done, err := lockFree(ctx, m)
	if err != nil {
		return err
	}
	defer done()
	return m.unlock(ctx)
}

// warmUp runs a few lock+unlock cycles so that connections are open and
// scripts loaded before anything is measured.
func warmUp(ctx context.Context, m mutex) error {
	for range 3 {
		if err := cycle(ctx, m); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	return nil
}

// runUncontended: one goroutine, lock+unlock on one key, as fast as it
// goes, for the duration (scenarios 1 and 5).
func runUncontended(ctx context.Context, b *bench, sc string, c contender) *result {
	nodes := b.nodesFor(sc, c)
	r := newResult(sc, c, len(nodes))
	st := &runStats{}
	p, err := c.open(ctx, addrs(nodes), st)
	if err != nil {
		r.fail(err)
		return r
	}
	defer func() { r.fail(p.close()) }()
	m, err := p.mutex(keyName(sc, "uncontended"))
	if err != nil {
		r.fail(err)
		return r
	}
	if err := warmUp(ctx, m); err != nil {
		r.fail(err)
		return r
	}
	cmds := startCommands(ctx, nodes)
	req0 := st.requests.Load()
	r.lat = make([]time.Duration, 0, 1<<14)
	start := time.Now()
	for time.Since(start) < b.duration {
		t0 := time.Now()
		if err := cycle(ctx, m); err != nil {
			r.fail(err)
			break
		}
		r.lat = append(r.lat, time.Since(t0))
		r.Ops++
	}
	r.Elapsed = time.Since(start)
	r.Commands, err = cmds.stop(ctx)
	r.fail(err)
	r.GiveUps = st.giveUps.Load()
	r.Requests = st.requests.Load() - req0
	return r
}

// runParallel: b.parallel goroutines, each locking and unlocking its own
// key through one client (scenario 2).
func runParallel(ctx context.Context, b *bench, _ string, c contender) *result {
	nodes := b.nodes[:1]
	r := newResult("2", c, 1)
	st := &runStats{}
	p, err := c.open(ctx, addrs(nodes), st)
	if err != nil {
		r.fail(err)
		return r
	}
	defer func() { r.fail(p.close()) }()
	ms := make([]mutex, b.parallel)
	for i := range ms {
		if ms[i], err = p.mutex(keyName("2", fmt.Sprint(i))); err != nil {
			r.fail(err)
			return r
		}
	}
	var mu sync.Mutex // guards r
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Go(func() {
			if err := warmUp(ctx, m); err != nil {
				mu.Lock()
				r.fail(err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if r.Errors > 0 {
		return r
	}
	cmds := startCommands(ctx, nodes)
	req0 := st.requests.Load()
	start := time.Now()
	for _, m := range ms {
		wg.Go(func() {
			lat := make([]time.Duration, 0, 1024)
			var err error
			for time.Since(start) < b.duration {
				t0 := time.Now()
				if err = cycle(ctx, m); err != nil {
					break
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			r.lat = append(r.lat, lat...)
			r.Ops += int64(len(lat))
			r.fail(err)
			mu.Unlock()
		})
	}
	wg.Wait()
	r.Elapsed = time.Since(start)
	r.Commands, err = cmds.stop(ctx)
	r.fail(err)
	r.GiveUps = st.giveUps.Load()
	r.Requests = st.requests.Load() - req0
	return r
}

const (
	contendedClients    = 4
	contendedGoroutines = 16
	// fifoSlack: a grant counts as out of FIFO order when another Lock call
	// that started more than this earlier is still waiting. Calls started
	// closer together may reach Redis in either order.
	fifoSlack = 2 * time.Millisecond
)

// runContended: 16 goroutines over 4 clients (simulated processes) on one
// key, each holding the lock for b.section (busy, like real work) and
// calling Lock again at once (scenarios 3 and 4).
func runContended(ctx context.Context, b *bench, sc string, c contender) *result {
	nodes := b.nodes[:1]
	r := newResult(sc, c, 1)
	st := &runStats{}
	procs := make([]process, contendedClients)
	defer func() {
		for _, p := range procs {
			if p != nil {
				r.fail(p.close())
			}
		}
	}()
	name := keyName(sc, "contended")
	ms := make([]mutex, contendedGoroutines)
	for i := range procs {
		var err error
		if procs[i], err = c.open(ctx, addrs(nodes), st); err != nil {
			r.fail(err)
			return r
		}
		wm, err := procs[i].mutex(keyName(sc, "warmup"))
		if err == nil {
			err = warmUp(ctx, wm)
		}
		if err != nil {
			r.fail(err)
			return r
		}
	}
	for g := range ms {
		var err error
		if ms[g], err = procs[g%contendedClients].mutex(name); err != nil {
			r.fail(err)
			return r
		}
	}

	var (
		mu          sync.Mutex // guards everything below and r
		holder      = -1
		grants      int64 // grant sequence number
		relStart    time.Time
		relEnd      time.Time
		relEndValid bool
		waitingFrom = map[int]time.Time{}
		end         time.Time
		inside      atomic.Int64
	)
	cmds := startCommands(ctx, nodes)
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
	for g, m := range ms {
		wg.Go(func() {
			for runCtx.Err() == nil {
				call := time.Now()
				mu.Lock()
				waitingFrom[g] = call
				mu.Unlock()
				err := m.lock(runCtx)
				now := time.Now()
				mu.Lock()
				delete(waitingFrom, g)
				if err != nil {
					if runCtx.Err() != nil {
						// Still waiting at the end: a wait of at least this long.
						r.wait = append(r.wait, end.Sub(call))
						r.Censored++
					} else {
						r.fail(fmt.Errorf("lock: %w", err))
					}
					mu.Unlock()
					return
				}
				r.wait = append(r.wait, now.Sub(call))
				for _, since := range waitingFrom {
					if since.Add(fifoSlack).Before(call) {
						r.FIFOViolations++
						break
					}
				}
				if holder >= 0 && holder != g {
					r.Handoffs++
					r.handoff = append(r.handoff, now.Sub(relStart))
					if relEndValid {
						r.handoffEnd = append(r.handoffEnd, now.Sub(relEnd))
					} else {
						r.EarlyHandoffs++
					}
				}
				holder = g
				grants++
				relEndValid = false
				mu.Unlock()

				if inside.Add(1) != 1 {
					mu.Lock()
					r.Violations++
					mu.Unlock()
				}
				if sc == "3s" {
					time.Sleep(b.section) // waiting for I/O: the CPU goes to the waiters
				} else {
					spin(b.section)
				}
				inside.Add(-1)

				mu.Lock()
				relStart = time.Now()
				seq := grants
				mu.Unlock()
				uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				err = m.unlock(uctx)
				ucancel()
				mu.Lock()
				if grants == seq {
					relEnd = time.Now()
					relEndValid = true
				}
				if err != nil {
					r.fail(fmt.Errorf("unlock: %w", err))
					mu.Unlock()
					return
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	r.Elapsed = time.Since(start)
	r.Ops = grants
	var err error
	r.Commands, err = cmds.stop(ctx)
	r.fail(err)
	r.GiveUps = st.giveUps.Load()
	r.Requests = st.requests.Load() - req0
	return r
}

// spin keeps the goroutine busy for d, like real work (a sleep would hand
// the CPU to the waiters and flatter the numbers).
func spin(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

// runPing measures one Redis round trip (PING) on node 0, the unit the
// handoff figures are compared with.
func runPing(ctx context.Context, b *bench) *result {
	r := &result{Scenario: "rtt", Contender: "PING round trip", Library: "go-redis", Config: "PING", Nodes: 1, Commands: -1}
	rdb := newRedis(b.nodes[0].addr, nil)
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		r.fail(err)
		return r
	}
	start := time.Now()
	for time.Since(start) < b.duration/4 {
		t0 := time.Now()
		if err := rdb.Ping(ctx).Err(); err != nil {
			r.fail(err)
			break
		}
		r.lat = append(r.lat, time.Since(t0))
		r.Ops++
	}
	r.Elapsed = time.Since(start)
	return r
}

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// runWatchdogScale: b.watchdogLocks locks held at once through one client in
// watchdog mode (lease b.watchdogLease, 3 s by default, renewed every
// third of it, a tick): renewal round trips per tick over three ticks, tick
// duration, goroutines and heap (scenario 6).
func runWatchdogScale(ctx context.Context, b *bench, _ string, c contender) *result {
	r := newResult("6", c, 1)
	r.Commands = -1
	n := b.watchdogLocks
	g0 := runtime.NumGoroutine()
	h0 := heapInUse()
	p, err := openRlockWith(b.nodes[0].addr, nil, rlock.WithWatchdogLease(b.watchdogLease), rlock.WithWatchdogInterval(b.watchdogLease/3))
	if err != nil {
		r.fail(err)
		return r
	}
	defer func() { r.fail(p.close()) }()
	w := watchdogRun{c: p.c, interval: b.watchdogLease / 3, n: n, servers: b.nodes[:1]}
	w.run(ctx, r, func() {
		r.Figures["goroutines_added"] = float64(runtime.NumGoroutine() - g0)
		r.Figures["heap_bytes_per_lock"] = (float64(heapInUse()) - float64(h0)) / float64(n)
	})
	return r
}

// runWatchdogCluster: scenario 6 on a Redis Cluster of three masters with a
// replica each, through a ClusterClient: b.clusterLocks locks (100,000 by
// default) spread over every slot (scenario 6c).
func runWatchdogCluster(ctx context.Context, b *bench, _ string, c contender) *result {
	r := newResult("6c", c, len(b.cluster.nodes))
	r.Commands = -1
	masters, err := b.cluster.masters(ctx)
	if err != nil {
		r.fail(err)
		return r
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs(b.cluster.nodes)})
	defer cc.Close()
	cl, err := rlock.NewClient(cc, rlock.WithWatchdogLease(b.watchdogLease), rlock.WithWatchdogInterval(b.watchdogLease/3))
	if err != nil {
		r.fail(err)
		return r
	}
	defer func() { r.fail(cl.Close()) }()
	w := watchdogRun{c: cl, interval: b.watchdogLease / 3, n: b.clusterLocks, servers: masters}
	w.run(ctx, r, func() { r.Figures["masters"] = float64(len(masters)) })
	return r
}

// watchdogRun takes n locks through c in watchdog mode, watches three
// ticks and releases them.
type watchdogRun struct {
	c        *rlock.Client
	interval time.Duration // the client's watchdog interval
	n        int
	servers  []*node // where to count commands
}

func (w watchdogRun) run(ctx context.Context, r *result, more func()) {
	scenario := r.Scenario
	locks := make([]*reentrant.Lock, w.n)
	for i := range locks {
		var err error
		if locks[i], err = reentrant.New(w.c, keyName(scenario, fmt.Sprint(i))); err != nil {
			r.fail(err)
			return
		}
	}
	// Take them all, 64 at a time.
	start := time.Now()
	if err := forEach(w.n, 64, func(i int) error { return locks[i].Lock(ctx) }); err != nil {
		r.fail(err)
		return
	}
	acquire := time.Since(start)
	s0 := w.c.WatchdogStats()
	cmds := startCommands(ctx, w.servers)
	// Watch three renewal intervals. The window starts at any phase of the
	// renewal schedule, so per-tick figures may include part of a fourth
	// round; round_trips_per_100_renewals does not depend on it.
	const ticks = 3
	interval := w.interval
	time.Sleep(ticks * interval)
	s1 := w.c.WatchdogStats()
	cmd, err := cmds.stop(ctx)
	r.fail(err)
	r.Figures = map[string]float64{}
	more()
	held, heldErrs := 0, 0
	for _, l := range locks {
		ok, err := l.IsHeld(ctx)
		switch {
		case err != nil:
			heldErrs++
		case ok:
			held++
		}
	}
	// Losses reported by the end of the held check. A lock found not held
	// there is reported lost when a renewal finds it gone, which may come
	// later still.
	s2 := w.c.WatchdogStats()
	if err := forEach(w.n, 64, func(i int) error { return locks[i].Unlock(ctx) }); err != nil {
		r.fail(err)
	}
	trips := float64(s1.RoundTrips - s0.RoundTrips)
	renewed := float64(s1.Renewed - s0.Renewed)
	ended := float64(s1.Ticks - s0.Ticks)
	maps.Copy(r.Figures, map[string]float64{
		"locks":                        float64(w.n),
		"held_after_ticks":             float64(held),
		"held_check_errors":            float64(heldErrs),
		"acquire_all_seconds":          acquire.Seconds(),
		"renewal_interval_seconds":     interval.Seconds(),
		"ticks_observed":               ticks,
		"renewal_rounds":               float64(s1.Rounds - s0.Rounds),
		"renewal_round_trips_per_tick": trips / ticks,
		"locks_renewed_per_tick":       renewed / ticks,
		"locks_per_round_trip":         renewed / max(trips, 1),
		"round_trips_per_100_renewals": 100 * trips / max(renewed, 1),
		"renewal_errors":               float64(s1.Errors - s0.Errors),
		"renewal_timeouts":             float64(s1.Timeouts - s0.Timeouts),
		"late_node_rounds":             float64(s1.Late - s0.Late),
		"tick_seconds_mean":            (s1.TickTime - s0.TickTime).Seconds() / max(ended, 1),
		"tick_seconds_max_ever":        s1.MaxTickTime.Seconds(),
		"lost":                         float64(s1.Lost - s0.Lost),
		"lost_by_held_check":           float64(s2.Lost - s0.Lost),
		"server_commands_per_tick":     float64(cmd) / ticks,
	})
	if cmd < 0 {
		delete(r.Figures, "server_commands_per_tick")
	}
	r.Ops = int64(w.n)
}

// runWaitersScale: b.waiters Lock calls blocked on b.waiterLocks locks held
// by another client, all through one client: pub/sub connections, heap per
// waiter, and the time until every waiter has had the lock once after the
// holder releases them all (each waiter unlocks at once) (scenario 7).
func runWaitersScale(ctx context.Context, b *bench, _ string, c contender) *result {
	r := newResult("7", c, 1)
	r.Commands = -1
	holder, err := openRlockWith(b.nodes[0].addr, nil)
	if err != nil {
		r.fail(err)
		return r
	}
	defer func() { r.fail(holder.close()) }()
	names := make([]string, b.waiterLocks)
	held := make([]*reentrant.Lock, b.waiterLocks)
	for i := range names {
		names[i] = keyName("7", fmt.Sprint(i))
		held[i], _ = reentrant.New(holder.c, names[i])
	}
	if err := forEach(len(held), 64, func(i int) error { return held[i].Lock(ctx) }); err != nil {
		r.fail(err)
		return r
	}

	g0 := runtime.NumGoroutine()
	h0 := heapInUse()
	var attempts, looks atomic.Int64
	ps := make([]*rlockProcess, max(b.waiterClients, 1))
	for i := range ps {
		p, err := openRlockWith(b.nodes[0].addr, nil)
		if err != nil {
			r.fail(err)
			return r
		}
		p.rdb.AddHook(attemptHook{&attempts, &looks})
		defer func() { r.fail(p.close()) }()
		ps[i] = p
	}
	blocked := func() (s rlock.WaiterStats) {
		for _, p := range ps {
			w := p.c.Waiters()
			s.Waiters += w.Waiters
			s.Connections += w.Connections
			s.Channels += w.Channels
		}
		return s
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		granted sync.WaitGroup
		errs    int64
		first   error
	)
	granted.Add(b.waiters)
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for i := range b.waiters {
		wg.Go(func() {
			defer granted.Done()
			l, err := reentrant.New(ps[(i/len(names))%len(ps)].c, names[i%len(names)]) // each lock's waiters over every client
			if err == nil {
				if err = l.Lock(wctx); err == nil {
					err = l.Unlock(wctx)
				}
			}
			if err != nil {
				mu.Lock()
				errs++
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	deadline := time.Now().Add(2 * time.Minute)
	for blocked().Waiters < b.waiters && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(time.Second) // let the retries on subscription confirmations settle
	ws := blocked()
	before, looksBefore := attempts.Load(), looks.Load()
	heap := float64(heapInUse()) - float64(h0)
	goroutines := runtime.NumGoroutine() - g0 - b.waiters
	serverPubsub, err := b.nodes[0].pubsubConnections(ctx)
	r.fail(err)

	start := time.Now()
	if err := forEach(len(held), 64, func(i int) error { return held[i].Unlock(ctx) }); err != nil {
		r.fail(err)
	}
	granted.Wait()
	wake := time.Since(start)
	wg.Wait()
	woken, looked := attempts.Load()-before, looks.Load()-looksBefore
	r.Errors += errs
	if first != nil && r.FirstError == "" {
		r.FirstError = first.Error()
	}
	r.Figures = map[string]float64{
		"waiters":                   float64(b.waiters),
		"locks":                     float64(b.waiterLocks),
		"waiters_blocked_seen":      float64(ws.Waiters),
		"pubsub_connections_client": float64(ws.Connections),
		"channels_subscribed":       float64(ws.Channels),
		"heap_bytes_per_waiter":     heap / float64(b.waiters),
		"library_goroutines":        float64(goroutines),
		"wake_all_seconds":          wake.Seconds(),
		"grants_per_second_wake":    float64(b.waiters) / wake.Seconds(),
		"waiter_clients":            float64(len(ps)),
		"attempts_per_grant_wake":   float64(woken) / float64(b.waiters),
		"looks_per_grant_wake":      float64(looked) / float64(b.waiters),
	}
	if serverPubsub >= 0 {
		r.Figures["pubsub_connections_server"] = float64(serverPubsub)
	}
	r.Ops = int64(b.waiters)
	return r
}

// attemptHook counts rlock's reentrant acquire script calls (attempts),
// and the PTTLs (looks) a waiter designated second sends instead of an
// attempt while the lock is held.
type attemptHook struct{ n, looks *atomic.Int64 }

func (h attemptHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h attemptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch args := cmd.Args(); {
		case len(args) > 1 && args[1] == lua.Lock.Hash():
			h.n.Add(1)
		case cmd.Name() == "pttl":
			h.looks.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h attemptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// forEach runs fn(0..n-1) on up to par goroutines and returns the first
// error with the number of failed calls.
func forEach(n, par int, fn func(i int) error) error {
	var next atomic.Int64
	var errMu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range min(par, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				// Keep going after an error: a lock left held would keep
				// its waiters (scenario 7) waiting.
				if err := fn(i); err != nil {
					errMu.Lock()
					errs = append(errs, err)
					errMu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return errors.Join(errs[0], fmt.Errorf("%d of the calls failed", len(errs)))
	}
	return nil
}
