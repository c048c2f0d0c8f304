package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/floor"
	"github.com/rlock-go/rlock/internal/lua"
	"github.com/rlock-go/rlock/latch"
	"github.com/rlock-go/rlock/semaphore"
)

// Scenarios 11, 12 and 13: rlock's semaphores (package semaphore: New and
// NewExpirable) and its count-down latch (package latch) against their
// floors, the least a semaphore or latch in the same data layout sends
// (internal/floor, sync.go): no operation record, no replay window, no
// waiter bookkeeping. The floors retry every 1 ms when no permit is free,
// as the lock floors do.

const (
	// semPermits is the permits of every semaphore of scenarios 11 and 12.
	semPermits = 4
	// latchWaiters wait for the latch of scenario 13, over
	// contendedClients clients; latchCount CountDown calls release them.
	latchWaiters = 64
	latchCount   = 4
)

func syncScenarios() []scenario {
	return []scenario{
		{id: "11", title: "Semaphore, uncontended acquire+release of 1 permit, one goroutine (rlock semaphores vs their floors)", contenders: semContenders, run: runUncontended},
		{id: "12", title: fmt.Sprintf("Semaphore, contended: 16 goroutines over 4 clients on %d permits, sleeping (I/O-like) section (rlock semaphores vs their floors)", semPermits), contenders: semContenders, run: runSemContended},
		{id: "13", title: fmt.Sprintf("Count-down latch: %d waiters over 4 clients released by %d CountDown calls (rlock latch vs its floor)", latchWaiters, latchCount), contenders: latchContenders, run: runLatchWake},
	}
}

func init() {
	scenarioHelp["11"] = [2]string{"semaphore", "semaphore acquire+release, one goroutine: p50 against a GET/DECRBY + INCRBY floor and Redisson-layout floors"}
	scenarioHelp["12"] = [2]string{"semaphore-contended", "16 goroutines over 4 clients on 4 permits, sleeping 1 ms section: acquires/s, wait p99, wake-ups (attempts after a wait) per release"}
	scenarioHelp["13"] = [2]string{"latch", "64 waiters over 4 clients: time from the last CountDown call to every waiter's Await returning"}
}

// isSyncScenario reports whether sc is a semaphore or latch scenario (its
// table).
func isSyncScenario(sc string) bool { return sc == "11" || sc == "12" || sc == "13" }

func semContenders(*bench) []contender {
	return []contender{
		{name: "floor", config: "GET/DECRBY script + INCRBY, retry 1 ms", open: openSemFloor(false)},
		{name: redissonFloorName, config: "RSemaphore's scripts: GET/DECRBY; INCRBY + PUBLISH, retry 1 ms; a floor, not a library", open: openSemFloor(true)},
		{name: "rlock", config: "semaphore.New", open: openRlockSem(false)},
		{name: redissonFloorName, config: "RPermitExpirableSemaphore's scripts: reclaim, GET/DECRBY, ZADD; ZREM, INCRBY + PUBLISH, retry 1 ms; a floor, not a library", open: openExpFloor},
		{name: "rlock", config: "semaphore.NewExpirable, watchdog lease", open: openRlockSem(true)},
	}
}

func latchContenders(*bench) []contender {
	return []contender{
		{name: redissonFloorName, config: "RCountDownLatch's countDown script; one subscription and one GET per client per wake; a floor, not a library", open: openLatchFloor},
		{name: "rlock", config: "latch.New", open: openRlockLatch},
	}
}

// attemptCounter is a process that counts its acquire attempts (script
// calls).
type attemptCounter interface{ attempts() int64 }

// --- semaphore floors --------------------------------------------------------

type semFloorProcess struct {
	rdb      *redis.Client
	redisson bool // release with INCRBY + PUBLISH (a script), else a plain INCRBY
	tries    atomic.Int64
}

func openSemFloor(redisson bool) func(context.Context, []string, *runStats) (process, error) {
	return func(_ context.Context, addrs []string, st *runStats) (process, error) {
		return &semFloorProcess{rdb: newRedis(addrs[0], st), redisson: redisson}, nil
	}
}

func (p *semFloorProcess) mutex(name string) (mutex, error) {
	if err := p.rdb.SetNX(context.Background(), name, semPermits, 0).Err(); err != nil {
		return nil, err
	}
	return &semFloorMutex{p: p, keys: []string{name, base.DerivedKey(semaphore.ChannelPrefix, name)}}, nil
}

func (p *semFloorProcess) close() error    { return p.rdb.Close() }
func (p *semFloorProcess) attempts() int64 { return p.tries.Load() }

type semFloorMutex struct {
	p    *semFloorProcess
	keys []string // the counter, its channel
}

func (m *semFloorMutex) lock(ctx context.Context) error {
	for {
		m.p.tries.Add(1)
		n, err := floor.SemAcquire.Run(ctx, m.p.rdb, m.keys[:1], 1).Int()
		if err != nil || n == 1 {
			return err
		}
		if err := sleepCtx(ctx, floorRetry); err != nil {
			return err
		}
	}
}

func (m *semFloorMutex) unlock(ctx context.Context) error {
	if m.p.redisson {
		return floor.SemReleaseRedisson.Run(ctx, m.p.rdb, m.keys, 1).Err()
	}
	return m.p.rdb.IncrBy(ctx, m.keys[0], 1).Err()
}

type expFloorProcess struct {
	rdb   *redis.Client
	tries atomic.Int64
}

func openExpFloor(_ context.Context, addrs []string, st *runStats) (process, error) {
	return &expFloorProcess{rdb: newRedis(addrs[0], st)}, nil
}

func (p *expFloorProcess) mutex(name string) (mutex, error) {
	if err := p.rdb.SetNX(context.Background(), name, semPermits, 0).Err(); err != nil {
		return nil, err
	}
	return &expFloorMutex{p: p, keys: []string{name, "{" + name + "}:timeout", base.DerivedKey(semaphore.ChannelPrefix, name)}}, nil
}

func (p *expFloorProcess) close() error    { return p.rdb.Close() }
func (p *expFloorProcess) attempts() int64 { return p.tries.Load() }

type expFloorMutex struct {
	p    *expFloorProcess
	keys []string // the counter, the timeout set, the channel
	id   string
}

func (m *expFloorMutex) lock(ctx context.Context) error {
	id := randomToken()
	for {
		m.p.tries.Add(1)
		now := time.Now().UnixMilli()
		n, err := floor.ExpAcquire.Run(ctx, m.p.rdb, m.keys, id, now+floorTTL.Milliseconds(), now).Int()
		if err != nil {
			return err
		}
		if n == 1 {
			m.id = id
			return nil
		}
		if err := sleepCtx(ctx, floorRetry); err != nil {
			return err
		}
	}
}

func (m *expFloorMutex) unlock(ctx context.Context) error {
	n, err := floor.ExpRelease.Run(ctx, m.p.rdb, m.keys, m.id).Int()
	if err == nil && n != 1 {
		err = errNotHeld
	}
	return err
}

// --- rlock semaphores --------------------------------------------------------

type rlockSemProcess struct {
	*rlockProcess
	expirable bool
	tries     atomic.Int64
}

func openRlockSem(expirable bool) func(context.Context, []string, *runStats) (process, error) {
	return func(_ context.Context, addrs []string, st *runStats) (process, error) {
		p, err := openRlockWith(addrs[0], st)
		if err != nil {
			return nil, err
		}
		sp := &rlockSemProcess{rlockProcess: p, expirable: expirable}
		p.rdb.AddHook(scriptCallHook{hashes: []string{lua.SemAcquire.Hash(), lua.ExpAcquire.Hash()}, n: &sp.tries})
		return sp, nil
	}
}

func (p *rlockSemProcess) attempts() int64 { return p.tries.Load() }

func (p *rlockSemProcess) mutex(name string) (mutex, error) {
	ctx, cancel := context.WithTimeout(context.Background(), lockTimeout)
	defer cancel()
	if p.expirable {
		e, err := semaphore.NewExpirable(p.c, name)
		if err == nil {
			_, err = e.TrySetPermits(ctx, semPermits)
		}
		return &expirableMutex{e: e}, err
	}
	s, err := semaphore.New(p.c, name)
	if err == nil {
		_, err = s.TrySetPermits(ctx, semPermits)
	}
	return &semMutex{s: s}, err
}

type semMutex struct{ s *semaphore.Semaphore }

func (m *semMutex) lock(ctx context.Context) error   { return m.s.Acquire(ctx, 1) }
func (m *semMutex) unlock(ctx context.Context) error { return m.s.Release(ctx, 1) }

type expirableMutex struct {
	e      *semaphore.Expirable
	permit *semaphore.Permit
}

func (m *expirableMutex) lock(ctx context.Context) error {
	p, err := m.e.Acquire(ctx)
	m.permit = p
	return err
}

func (m *expirableMutex) unlock(ctx context.Context) error {
	if m.permit == nil {
		return errNotHeld
	}
	err := m.permit.Release(ctx)
	m.permit = nil
	return err
}

// scriptCallHook counts the calls of the scripts whose SHA1s it is given
// (EVALSHA, or EVAL after a NOSCRIPT, both carry the hash or the body;
// go-redis's Script.Run sends EVALSHA first).
type scriptCallHook struct {
	hashes []string
	n      *atomic.Int64
}

func (h scriptCallHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h scriptCallHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); len(args) > 1 {
			for _, hash := range h.hashes {
				if args[1] == hash {
					h.n.Add(1)
				}
			}
		}
		return next(ctx, cmd)
	}
}
func (h scriptCallHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if args := cmd.Args(); len(args) > 1 {
				for _, hash := range h.hashes {
					if args[1] == hash {
						h.n.Add(1)
					}
				}
			}
		}
		return next(ctx, cmds)
	}
}

// runSemContended: 16 goroutines over 4 clients on one semaphore of
// semPermits permits, each taking one permit for b.section (sleeping,
// like the I/O a semaphore usually bounds: with a busy section the two
// CPUs of a small machine, not the permits, would bound the acquires) and
// calling Acquire again at once (scenario 12). Ops are acquires; wait is
// one Acquire call; Figures hold the attempts (acquire script calls) per
// acquire, the wake-ups per release (attempts after the first of a call,
// per release) and the most holders seen at once.
func runSemContended(ctx context.Context, b *bench, sc string, c contender) *result {
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
	name := keyName(sc, "sem")
	ms := make([]mutex, contendedGoroutines)
	for i := range procs {
		var err error
		if procs[i], err = c.open(ctx, addrs(nodes), st); err != nil {
			r.fail(err)
			return r
		}
	}
	for g := range ms {
		m, err := procs[g%contendedClients].mutex(name)
		if err == nil {
			err = warmUp(ctx, m)
		}
		if err != nil {
			r.fail(err)
			return r
		}
		ms[g] = m
	}
	tries := func() (n int64) {
		for _, p := range procs {
			if a, ok := p.(attemptCounter); ok {
				n += a.attempts()
			}
		}
		return n
	}

	var (
		mu       sync.Mutex // guards r, end and the counts
		end      time.Time
		calls    int64
		acquires int64
		releases int64
		inside   atomic.Int64
		most     int64
	)
	cmds := startCommands(ctx, nodes)
	req0, tries0 := st.requests.Load(), tries()
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
	for _, m := range ms {
		wg.Go(func() {
			for runCtx.Err() == nil {
				call := time.Now()
				mu.Lock()
				calls++
				mu.Unlock()
				err := m.lock(runCtx)
				now := time.Now()
				mu.Lock()
				if err != nil {
					if runCtx.Err() != nil {
						r.wait = append(r.wait, end.Sub(call))
						r.Censored++
					} else {
						r.fail(fmt.Errorf("acquire: %w", err))
					}
					mu.Unlock()
					return
				}
				r.wait = append(r.wait, now.Sub(call))
				acquires++
				mu.Unlock()

				n := inside.Add(1)
				mu.Lock()
				most = max(most, n)
				if n > semPermits {
					r.Violations++
				}
				mu.Unlock()
				time.Sleep(b.section)
				inside.Add(-1)

				uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				err = m.unlock(uctx)
				ucancel()
				mu.Lock()
				if err != nil {
					r.fail(fmt.Errorf("release: %w", err))
					mu.Unlock()
					return
				}
				releases++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	r.Elapsed = time.Since(start)
	r.Ops = acquires
	var err error
	r.Commands, err = cmds.stop(ctx)
	r.fail(err)
	r.Requests = st.requests.Load() - req0
	attempts := tries() - tries0
	r.Figures = map[string]float64{
		"attempts_total": float64(attempts),
		"calls_total":    float64(calls),
		"releases_total": float64(releases),
		"holders_max":    float64(most),
	}
	return r
}

// --- latch -------------------------------------------------------------------

// latchProcess is one client of a latch implementation.
type latchProcess interface {
	process
	setCount(ctx context.Context, name string, n int) error
	countDown(ctx context.Context, name string) error
	// await blocks until the latch's count is zero.
	await(ctx context.Context, name string) error
	// blocked is the Await calls waiting now.
	blocked() int
}

// errNotALock is the error of the latch processes' mutex method.
var errNotALock = errors.New("a latch contender has no mutex")

type rlockLatchProcess struct{ *rlockProcess }

func openRlockLatch(_ context.Context, addrs []string, st *runStats) (process, error) {
	p, err := openRlockWith(addrs[0], st)
	if err != nil {
		return nil, err
	}
	return &rlockLatchProcess{p}, nil
}

func (p *rlockLatchProcess) mutex(string) (mutex, error) { return nil, errNotALock }

func (p *rlockLatchProcess) setCount(ctx context.Context, name string, n int) error {
	l, err := latch.New(p.c, name)
	if err == nil {
		var ok bool
		if ok, err = l.TrySetCount(ctx, int64(n)); err == nil && !ok {
			err = errors.New("the latch still has a count")
		}
	}
	return err
}

func (p *rlockLatchProcess) countDown(ctx context.Context, name string) error {
	l, err := latch.New(p.c, name)
	if err == nil {
		err = l.CountDown(ctx)
	}
	return err
}

func (p *rlockLatchProcess) await(ctx context.Context, name string) error {
	l, err := latch.New(p.c, name)
	if err == nil {
		err = l.Await(ctx)
	}
	return err
}

func (p *rlockLatchProcess) blocked() int { return p.c.Waiters().Waiters }

// latchFloorProcess is the least a Redisson-layout latch sends: one
// subscription per client and latch, and on each "0" one GET per client,
// which releases all of the client's waiters.
type latchFloorProcess struct {
	rdb  *redis.Client
	mu   sync.Mutex
	subs map[string]*latchFloorSub
	n    int // waiters blocked
}

type latchFloorSub struct {
	ps   *redis.PubSub
	zero chan struct{} // closed when a "0" found the count zero; replaced then
	done chan struct{}
}

func openLatchFloor(_ context.Context, addrs []string, st *runStats) (process, error) {
	return &latchFloorProcess{rdb: newRedis(addrs[0], st), subs: map[string]*latchFloorSub{}}, nil
}

func (p *latchFloorProcess) mutex(string) (mutex, error) { return nil, errNotALock }

func (p *latchFloorProcess) close() error {
	p.mu.Lock()
	subs := p.subs
	p.subs = nil
	p.mu.Unlock()
	var errs []error
	for _, s := range subs {
		errs = append(errs, s.ps.Close())
		<-s.done
	}
	return errors.Join(append(errs, p.rdb.Close())...)
}

func (p *latchFloorProcess) setCount(ctx context.Context, name string, n int) error {
	ok, err := p.rdb.SetNX(ctx, name, n, 0).Result()
	if err == nil && !ok {
		err = errors.New("the latch still has a count")
	}
	return err
}

func (p *latchFloorProcess) countDown(ctx context.Context, name string) error {
	return floor.LatchCountDown.Run(ctx, p.rdb, []string{name, base.LatchChannel(name)}).Err()
}

func (p *latchFloorProcess) blocked() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// sub returns the client's subscription to name's channel, subscribing
// (and waiting for the confirmation) on first use.
func (p *latchFloorProcess) sub(ctx context.Context, name string) (*latchFloorSub, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.subs[name]; s != nil {
		return s, nil
	}
	ps := p.rdb.Subscribe(ctx, base.LatchChannel(name))
	if _, err := ps.Receive(ctx); err != nil { // the confirmation
		_ = ps.Close()
		return nil, err
	}
	s := &latchFloorSub{ps: ps, zero: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for msg := range ps.Channel() {
			if msg.Payload != "0" {
				continue
			}
			n, err := p.rdb.Get(context.Background(), name).Int()
			if errors.Is(err, redis.Nil) || err == nil && n <= 0 {
				p.mu.Lock()
				close(s.zero)
				s.zero = make(chan struct{})
				p.mu.Unlock()
			}
		}
	}()
	p.subs[name] = s
	return s, nil
}

func (p *latchFloorProcess) await(ctx context.Context, name string) error {
	s, err := p.sub(ctx, name)
	if err != nil {
		return err
	}
	p.mu.Lock()
	zero := s.zero
	p.n++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.n--
		p.mu.Unlock()
	}()
	// Subscribed before this look: a "0" after it closes zero.
	n, err := p.rdb.Get(ctx, name).Int()
	if errors.Is(err, redis.Nil) || err == nil && n <= 0 {
		return nil
	}
	if err != nil {
		return err
	}
	select {
	case <-zero:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// runLatchWake: rounds of latchWaiters Await calls over contendedClients
// clients on one latch of count latchCount, counted down by one more
// client once every waiter is blocked and every client's subscription is
// confirmed at the server, for b.duration (at least one round after a
// warm-up round) (scenario 13). lat holds each waiter's time from the
// last CountDown call to its Await returning; wait each round's time to
// the last waiter; Commands and Requests count from the last CountDown
// call to the last waiter, and Ops is the waiters woken.
func runLatchWake(ctx context.Context, b *bench, sc string, c contender) *result {
	nodes := b.nodes[:1]
	r := newResult(sc, c, 1)
	st := &runStats{}
	procs := make([]latchProcess, contendedClients+1) // the last one counts down
	defer func() {
		for _, p := range procs {
			if p != nil {
				r.fail(p.close())
			}
		}
	}()
	for i := range procs {
		p, err := c.open(ctx, addrs(nodes), st)
		if err != nil {
			r.fail(err)
			return r
		}
		procs[i] = p.(latchProcess)
	}
	waiters, counter := procs[:contendedClients], procs[contendedClients]
	name := keyName(sc, "latch")
	channel := base.LatchChannel(name)
	var rounds int
	var commands int64
	var start time.Time
	for round := 0; round < 2 || time.Since(start) < b.duration; round++ {
		warm := round == 0 // subscriptions made, scripts loaded
		if round == 1 {
			start = time.Now()
		}
		if err := counter.setCount(ctx, name, latchCount); err != nil {
			r.fail(fmt.Errorf("set count: %w", err))
			return r
		}
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		woke := make([]time.Time, latchWaiters)
		errs := make([]error, latchWaiters)
		var wg sync.WaitGroup
		for i := range latchWaiters {
			wg.Go(func() {
				errs[i] = waiters[i%len(waiters)].await(rctx, name)
				woke[i] = time.Now()
			})
		}
		// Every waiter blocked, every client subscribed at the server.
		ready := func() bool {
			n := 0
			for _, p := range waiters {
				n += p.blocked()
			}
			if n < latchWaiters {
				return false
			}
			subs, err := nodes[0].admin.PubSubNumSub(ctx, channel).Result()
			return err == nil && subs[channel] >= int64(len(waiters))
		}
		for !ready() && rctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		for range latchCount - 1 {
			if err := counter.countDown(ctx, name); err != nil {
				r.fail(fmt.Errorf("count down: %w", err))
			}
		}
		cmds := startCommands(ctx, nodes)
		req0 := st.requests.Load()
		t0 := time.Now()
		if err := counter.countDown(ctx, name); err != nil {
			r.fail(fmt.Errorf("count down: %w", err))
		}
		wg.Wait()
		req := st.requests.Load() - req0
		n, err := cmds.stop(ctx)
		r.fail(err)
		cancel()
		last := t0
		for i, e := range errs {
			if e != nil {
				r.fail(fmt.Errorf("await: %w", e))
				continue
			}
			last = latest(last, woke[i])
			if !warm {
				r.lat = append(r.lat, woke[i].Sub(t0))
			}
		}
		if warm {
			continue
		}
		r.wait = append(r.wait, last.Sub(t0))
		r.Requests += req
		if n < 0 || commands < 0 {
			commands = -1
		} else {
			commands += n
		}
		rounds++
		r.Ops += latchWaiters
	}
	r.Elapsed = time.Since(start)
	r.Commands = commands
	r.Figures = map[string]float64{"rounds_total": float64(rounds)}
	return r
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// syncTable writes the table of a semaphore or latch scenario.
func syncTable(w *strings.Builder, rep *report, sc string, rs []*result) {
	var fl *result
	for _, r := range rs {
		if r.Library == "floor" || sc == "13" && r.Library == redissonFloorName {
			fl = r
			break
		}
	}
	switch sc {
	case "11":
		fmt.Fprintf(w, "One goroutine, Acquire(1) then Release(1) on a semaphore of %d permits, as fast as it goes. Ratios against the floor (a GET/DECRBY script and a plain INCRBY) in the same run.\n\n", semPermits)
		w.WriteString("| contender | acquire+release p50 | p99 | ops/s | p50 vs floor | ops/s vs floor | requests/op | server cmds/op | notes |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range rs {
			var rp, ro float64
			if fl != nil && fl.Lat != nil && r.Lat != nil {
				rp = ratio(float64(r.Lat.P50), float64(fl.Lat.P50))
				ro = ratio(r.OpsPerSec, fl.OpsPerSec)
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Contender, q(r.Lat, p50), q(r.Lat, p99),
				fmtRate(r.OpsPerSec), fmtRatio(rp), fmtRatio(ro), fmtCmds(r.ReqsPerOp), fmtCmds(r.CmdsPerOp), notes(r))
		}
	case "12":
		fmt.Fprintf(w, "16 goroutines over 4 clients on one semaphore of %d permits, each holding one for a %s sleeping (I/O-like) section and calling Acquire again at once. Wait: one Acquire call (calls still waiting at the end count up to the end). Attempts: acquire script calls; wake-ups per release: attempts after the first of an Acquire call, per release (the floors retry every 1 ms; rlock waits for a release message or its poll). Most holders must not exceed %d.\n\n", semPermits, rep.Settings["section"], semPermits)
		w.WriteString("| contender | acquires/s | vs floor | wait p50 | wait p99 | attempts/acquire | wake-ups/release | requests/acquire | server cmds/acquire | most holders | notes |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range rs {
			var ro float64
			if fl != nil {
				ro = ratio(r.OpsPerSec, fl.OpsPerSec)
			}
			f := r.Figures
			mx := fmt.Sprintf("%.0f", f["holders_max"])
			if r.Violations > 0 {
				mx += fmt.Sprintf(" **EXCEEDED %d×**", r.Violations)
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Contender, fmtRate(r.OpsPerSec), fmtRatio(ro),
				q(r.Wait, p50), q(r.Wait, p99), fmtCmds(ratio(f["attempts_total"], float64(r.Ops))), fmtCmds(ratio(f["attempts_total"]-f["calls_total"], f["releases_total"])),
				fmtCmds(r.ReqsPerOp), fmtCmds(r.CmdsPerOp), mx, notes(r))
		}
	case "13":
		fmt.Fprintf(w, "Rounds of %d Await calls over 4 clients on one latch of count %d, counted down by a fifth client once every waiter is blocked and every client's subscription is confirmed at the server. Wake: from the last CountDown call to an Await returning; all woken: to the round's last waiter. Requests and server commands: from the last CountDown call to the last waiter, per waiter. Ratios against the Redisson-layout floor in the same run.\n\n", latchWaiters, latchCount)
		w.WriteString("| contender | rounds | wake p50 | wake p99 | all woken p50 | all woken max | all woken p50 vs floor | requests/waiter | server cmds/waiter | notes |\n|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range rs {
			var ra float64
			if fl != nil && fl.Wait != nil && r.Wait != nil {
				ra = ratio(float64(r.Wait.P50), float64(fl.Wait.P50))
			}
			maxAll := "–"
			if r.Wait != nil {
				maxAll = fmtDur(r.Wait.Max)
			}
			fmt.Fprintf(w, "| %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Contender, r.Figures["rounds_total"], q(r.Lat, p50), q(r.Lat, p99),
				q(r.Wait, p50), maxAll, fmtRatio(ra), fmtCmds(r.ReqsPerOp), fmtCmds(r.CmdsPerOp), notes(r))
		}
	}
}

// syncPanels adds the chart panels of scenarios 11-13 through add (see
// panels).
func syncPanels(add func(sc, title string, isRatio bool, unit string, value func(r, floor *result) float64)) {
	nan := math.NaN()
	add("11", "11 · semaphore acquire+release p50, × floor (lower is better)", true, "×", func(r, f *result) float64 {
		if f == nil || f.Lat == nil || r.Lat == nil {
			return nan
		}
		return ratio(float64(r.Lat.P50), float64(f.Lat.P50))
	})
	add("12", "12 · semaphore, 16 goroutines on 4 permits: acquires/s, × floor (higher is better)", true, "×", func(r, f *result) float64 {
		if f == nil {
			return nan
		}
		return ratio(r.OpsPerSec, f.OpsPerSec)
	})
	add("13", "13 · latch, 64 waiters: last CountDown to every waiter woken, p50, ms (lower is better)", false, "ms", func(r, _ *result) float64 {
		if r.Wait == nil {
			return nan
		}
		return float64(r.Wait.P50) / float64(time.Millisecond)
	})
}
