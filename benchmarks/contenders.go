package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/fair"
	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/floor"
	"github.com/rlock-go/rlock/redlock"
	"github.com/rlock-go/rlock/reentrant"
)

// A contender is one lock library with one configuration. Every scenario
// runs every contender that applies to it, in the same run, interleaved.
//
// Adding a lock kind is one value of this type: a name, the scenarios it
// applies to, and an open function returning a process.
type contender struct {
	name   string // library, e.g. "redsync"
	config string // its settings, e.g. "defaults: 32 tries, 50-250 ms"
	// single: runs on one Redis node in scenarios 1-3.
	single bool
	// fair: a FIFO lock, run in scenario 4.
	fair bool
	// nodes: the number of nodes it runs on in scenario 5 (0: not in it).
	nodes int
	// realOnly: needs a feature miniredis lacks (the reason), so it is
	// skipped on miniredis.
	realOnly string
	// open sets up one simulated process (one client of the library) on
	// the given nodes. Give-ups (a Lock call that returned "not obtained"
	// and was called again by the harness) are counted in st.
	open func(ctx context.Context, addrs []string, st *runStats) (process, error)
}

func (c contender) label() string { return c.name + " (" + c.config + ")" }

// process is one client of a lock library, as one application process
// would hold it.
type process interface {
	// mutex returns a lock handle on name. Handles are used by one
	// goroutine at a time.
	mutex(name string) (mutex, error)
	close() error
}

// mutex is a blocking lock handle: lock waits until the lock is held (the
// harness's lock calls every library until it succeeds; give-ups of
// libraries whose Lock gives up are counted), unlock releases it.
type mutex interface {
	lock(ctx context.Context) error
	unlock(ctx context.Context) error
}

// runStats are counters shared by every process of one run.
type runStats struct {
	giveUps  atomic.Int64
	requests atomic.Int64 // commands the clients sent (a pipeline counts each command)
}

// countHook counts the commands a go-redis client sends. Pub/sub
// (UN)SUBSCRIBE on a go-redis PubSub connection is not seen by hooks.
type countHook struct{ n *atomic.Int64 }

func (h countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// countingRueidis counts the commands a rueidis client sends.
type countingRueidis struct {
	rueidis.Client
	n *atomic.Int64
}

func (c countingRueidis) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.n.Add(1)
	return c.Client.Do(ctx, cmd)
}

func (c countingRueidis) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	c.n.Add(int64(len(cmds)))
	return c.Client.DoMulti(ctx, cmds...)
}

func (c countingRueidis) DoCache(ctx context.Context, cmd rueidis.Cacheable, ttl time.Duration) rueidis.RedisResult {
	c.n.Add(1)
	return c.Client.DoCache(ctx, cmd, ttl)
}

func (c countingRueidis) DoMultiCache(ctx context.Context, multi ...rueidis.CacheableTTL) []rueidis.RedisResult {
	c.n.Add(int64(len(multi)))
	return c.Client.DoMultiCache(ctx, multi...)
}

// Retry and expiry settings. The floor's are the least work a lock can do;
// the peers' come from their documentation (see contenders below).
const (
	floorRetry = time.Millisecond
	floorTTL   = 30 * time.Second
	peerTTL    = 30 * time.Second
	fastRetry  = time.Millisecond
)

// singleNodeContenders are the contenders of scenarios 1-3.
func singleNodeContenders() []contender {
	return []contender{
		{name: "floor", config: "SET NX PX + compare-and-delete, retry 1 ms", single: true, nodes: 1, open: openFloor},
		{name: redissonFloorName, config: "Redisson-layout scripts, retry 1 ms; a floor, not a library", single: true, open: openRedissonFloor(false)},
		{name: redissonFloorName, config: "the same with exactly-once releases (replay latch); a floor, not a library", single: true, open: openRedissonFloor(true)},
		{name: "rlock", config: "reentrant", single: true, fair: true, nodes: 1, open: openRlock},
		{name: "rlock", config: "fair", single: true, fair: true, open: openRlockFair},
		{name: "rlock", config: "reentrant, WithAutoPipeline", single: true, open: openRlockAutoPipeline},
		{name: "redsync", config: "defaults: 32 tries, 50-250 ms", single: true, nodes: 5, open: openRedsync(nil)},
		{name: "redsync", config: "retry 1 ms, unlimited tries", single: true, open: openRedsync([]redsync.Option{
			redsync.WithRetryDelay(fastRetry), redsync.WithTries(math.MaxInt32),
		})},
		{name: "redislock", config: "doc example: 100 ms ×3", single: true, open: openRedislock(func() redislock.RetryStrategy {
			return redislock.LimitRetry(redislock.LinearBackoff(100*time.Millisecond), 3)
		})},
		{name: "redislock", config: "retry 1 ms", single: true, open: openRedislock(func() redislock.RetryStrategy {
			return redislock.LinearBackoff(fastRetry)
		})},
		{name: "rueidislock", config: "defaults: 3 keys", single: true, realOnly: needsTracking, open: openRueidislock(0, false)},
		{name: "rueidislock", config: "README: 1 key, NOLOOP", single: true, realOnly: needsTracking, open: openRueidislock(1, true)},
	}
}

const needsTracking = "rueidislock waits through CLIENT TRACKING, which miniredis lacks"

// multiNodeContenders are the contenders of scenario 5 that are not
// single-node contenders run on node 0 (those are taken from
// singleNodeContenders by their nodes field).
func multiNodeContenders() []contender {
	return []contender{
		{name: "redsync", config: "1 pool", nodes: 1, open: openRedsync(nil)},
		{name: "rlock", config: "RedLock, nodes in parallel", nodes: 5, open: openRlockRedLock},
		{name: redlockFloorName, config: "SET NX PX + compare-and-delete, goroutine per node and call; a floor, not a library", nodes: 5, open: openRedlockFloor(setNXLayout, false)},
		{name: redlockFloorName, config: "Redisson-layout scripts, goroutine per node and call; a floor, not a library", nodes: 5, open: openRedlockFloor(redissonLayout, false)},
		{name: redlockFloorName, config: "Redisson-layout scripts, parked goroutine per node; a floor, not a library", nodes: 5, open: openRedlockFloor(redissonLayout, true)},
		{name: redlockFloorName, config: "the same with exactly-once releases (replay latch); a floor, not a library", nodes: 5, open: openRedlockFloor(redissonOnceLayout, true)},
	}
}

// newRedis returns a go-redis client with default options whose commands
// are counted in st (when st is not nil).
func newRedis(addr string, st *runStats) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	if st != nil {
		rdb.AddHook(countHook{&st.requests})
	}
	return rdb
}

func randomToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// sleepCtx sleeps d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

var errNotHeld = errors.New("unlock: lock was not held")

// --- floor ---------------------------------------------------------------

type floorProcess struct{ rdb *redis.Client }

func openFloor(_ context.Context, addrs []string, st *runStats) (process, error) {
	return &floorProcess{rdb: newRedis(addrs[0], st)}, nil
}

func (p *floorProcess) mutex(name string) (mutex, error) {
	return &floorMutex{rdb: p.rdb, key: name, token: randomToken()}, nil
}
func (p *floorProcess) close() error { return p.rdb.Close() }

type floorMutex struct {
	rdb   *redis.Client
	key   string
	token string
}

func (m *floorMutex) lock(ctx context.Context) error {
	for {
		ok, err := m.rdb.SetNX(ctx, m.key, m.token, floorTTL).Result()
		if err != nil || ok {
			return err
		}
		if err := sleepCtx(ctx, floorRetry); err != nil {
			return err
		}
	}
}

func (m *floorMutex) unlock(ctx context.Context) error {
	n, err := floor.CompareAndDelete.Run(ctx, m.rdb, []string{m.key}, m.token).Int()
	if err == nil && n != 1 {
		err = errNotHeld
	}
	return err
}

// --- rlock reentrant -------------------------------------------------------

type rlockProcess struct {
	rdb *redis.Client
	c   *rlock.Client
}

func openRlock(_ context.Context, addrs []string, st *runStats) (process, error) {
	return openRlockWith(addrs[0], st)
}

// openRlockBackground locks with the harness's ctx stripped of its
// deadline (context.WithoutCancel), as a caller with context.Background()
// does: the attempt then runs on the calling goroutine. Scenario 1 only:
// a Lock that waits would never give up.
func openRlockBackground(_ context.Context, addrs []string, st *runStats) (process, error) {
	p, err := openRlockWith(addrs[0], st)
	if err != nil {
		return nil, err
	}
	return rlockBackgroundProcess{p}, nil
}

type rlockBackgroundProcess struct{ *rlockProcess }

func (p rlockBackgroundProcess) mutex(name string) (mutex, error) {
	m, err := p.rlockProcess.mutex(name)
	if err != nil {
		return nil, err
	}
	return rlockBackgroundMutex{m.(*rlockMutex)}, nil
}

type rlockBackgroundMutex struct{ *rlockMutex }

func (m rlockBackgroundMutex) lock(ctx context.Context) error {
	return m.l.Lock(context.WithoutCancel(ctx))
}

// openRlockAutoPipeline sends the scripts through go-redis's
// auto-pipeliner (rlock.WithAutoPipeline).
func openRlockAutoPipeline(_ context.Context, addrs []string, st *runStats) (process, error) {
	return openRlockWith(addrs[0], st, rlock.WithAutoPipeline())
}

func openRlockWith(addr string, st *runStats, opts ...rlock.ClientOption) (*rlockProcess, error) {
	rdb := newRedis(addr, st)
	c, err := rlock.NewClient(rdb, opts...)
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	return &rlockProcess{rdb: rdb, c: c}, nil
}

func (p *rlockProcess) mutex(name string) (mutex, error) {
	l, err := reentrant.New(p.c, name)
	if err != nil {
		return nil, err
	}
	return &rlockMutex{l}, nil
}

func (p *rlockProcess) close() error {
	return errors.Join(p.c.Close(), p.rdb.Close())
}

// openRlockFair is openRlock with the fair lock.
func openRlockFair(_ context.Context, addrs []string, st *runStats) (process, error) {
	p, err := openRlockWith(addrs[0], st)
	if err != nil {
		return nil, err
	}
	return &rlockFairProcess{p}, nil
}

type rlockFairProcess struct{ *rlockProcess }

func (p *rlockFairProcess) mutex(name string) (mutex, error) {
	l, err := fair.New(p.c, name)
	if err != nil {
		return nil, err
	}
	return &rlockMutex{l}, nil
}

// openRlockRedLock opens one rlock client per node and locks them as a
// RedLock (watchdog mode, the default).
func openRlockRedLock(_ context.Context, addrs []string, st *runStats) (process, error) {
	p := &rlockRedLockProcess{}
	for _, a := range addrs {
		n, err := openRlockWith(a, st)
		if err != nil {
			_ = p.close()
			return nil, err
		}
		p.nodes = append(p.nodes, n)
		p.clients = append(p.clients, n.c)
	}
	return p, nil
}

type rlockRedLockProcess struct {
	nodes   []*rlockProcess
	clients []*rlock.Client
}

func (p *rlockRedLockProcess) mutex(name string) (mutex, error) {
	l, err := redlock.New(p.clients, name)
	if err != nil {
		return nil, err
	}
	return &rlockMutex{l}, nil
}

func (p *rlockRedLockProcess) close() error {
	var errs []error
	for _, n := range p.nodes {
		errs = append(errs, n.close())
	}
	return errors.Join(errs...)
}

type rlockMutex struct{ l rlock.Locker }

func (m *rlockMutex) lock(ctx context.Context) error   { return m.l.Lock(ctx) }
func (m *rlockMutex) unlock(ctx context.Context) error { return m.l.Unlock(ctx) }

// --- redsync ---------------------------------------------------------------
// Defaults (redsync.NewMutex, as its README uses it): 32 tries with a random
// 50-250 ms delay between them, an 8 s expiry. With several addresses it is
// RedLock over one pool per node.

type redsyncProcess struct {
	rdbs []*redis.Client
	rs   *redsync.Redsync
	opts []redsync.Option
	st   *runStats
}

func openRedsync(opts []redsync.Option) func(context.Context, []string, *runStats) (process, error) {
	return func(_ context.Context, addrs []string, st *runStats) (process, error) {
		p := &redsyncProcess{opts: opts, st: st}
		var pools []redsyncredis.Pool
		for _, a := range addrs {
			rdb := newRedis(a, st)
			p.rdbs = append(p.rdbs, rdb)
			pools = append(pools, goredis.NewPool(rdb))
		}
		p.rs = redsync.New(pools...)
		return p, nil
	}
}

func (p *redsyncProcess) mutex(name string) (mutex, error) {
	return &redsyncMutex{m: p.rs.NewMutex(name, p.opts...), st: p.st}, nil
}

func (p *redsyncProcess) close() error {
	var errs []error
	for _, r := range p.rdbs {
		errs = append(errs, r.Close())
	}
	return errors.Join(errs...)
}

type redsyncMutex struct {
	m  *redsync.Mutex
	st *runStats
}

func (m *redsyncMutex) lock(ctx context.Context) error {
	for {
		err := m.m.LockContext(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var taken *redsync.ErrTaken
		var nodeTaken *redsync.ErrNodeTaken
		if errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken) || errors.As(err, &nodeTaken) {
			m.st.giveUps.Add(1) // tries exhausted: the application calls Lock again
			continue
		}
		return err
	}
}

func (m *redsyncMutex) unlock(ctx context.Context) error {
	ok, err := m.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = errNotHeld
	}
	return err
}

// --- bsm/redislock ---------------------------------------------------------
// Default: no retry at all. Its documented example retries every 100 ms, up
// to 3 times; its docs recommend at least 16 ms for exponential backoff.

type redislockProcess struct {
	rdb   *redis.Client
	c     *redislock.Client
	retry func() redislock.RetryStrategy
	st    *runStats
}

func openRedislock(retry func() redislock.RetryStrategy) func(context.Context, []string, *runStats) (process, error) {
	return func(_ context.Context, addrs []string, st *runStats) (process, error) {
		rdb := newRedis(addrs[0], st)
		return &redislockProcess{rdb: rdb, c: redislock.New(rdb), retry: retry, st: st}, nil
	}
}

func (p *redislockProcess) mutex(name string) (mutex, error) {
	return &redislockMutex{p: p, key: name}, nil
}
func (p *redislockProcess) close() error { return p.rdb.Close() }

type redislockMutex struct {
	p    *redislockProcess
	key  string
	held *redislock.Lock
}

func (m *redislockMutex) lock(ctx context.Context) error {
	for {
		// A fresh strategy per call: LimitRetry counts its attempts.
		l, err := m.p.c.Obtain(ctx, m.key, peerTTL, &redislock.Options{RetryStrategy: m.p.retry()})
		if err == nil {
			m.held = l
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// Not obtained within its retries, or within the TTL it uses as a
		// deadline when ctx has none: the application calls again.
		if errors.Is(err, redislock.ErrNotObtained) || errors.Is(err, context.DeadlineExceeded) {
			m.p.st.giveUps.Add(1)
			continue
		}
		return err
	}
}

func (m *redislockMutex) unlock(ctx context.Context) error {
	if m.held == nil {
		return errNotHeld
	}
	err := m.held.Release(ctx)
	m.held = nil
	return err
}

// --- rueidislock -----------------------------------------------------------
// Defaults: KeyMajority 2 (3 keys per lock), 5 s validity extended every
// 2.5 s; waiters retry on client-side-caching invalidations. Its README's
// single-instance setting: KeyMajority 1 and NoLoopTracking (Redis >= 7.0.5).

type rueidisProcess struct{ l rueidislock.Locker }

func openRueidislock(majority int32, noloop bool) func(context.Context, []string, *runStats) (process, error) {
	return func(_ context.Context, addrs []string, st *runStats) (process, error) {
		l, err := rueidislock.NewLocker(rueidislock.LockerOption{
			ClientOption: rueidis.ClientOption{InitAddress: []string{addrs[0]}},
			ClientBuilder: func(o rueidis.ClientOption) (rueidis.Client, error) {
				c, err := rueidis.NewClient(o)
				if err != nil {
					return nil, err
				}
				return countingRueidis{Client: c, n: &st.requests}, nil
			},
			KeyMajority:    majority,
			NoLoopTracking: noloop,
		})
		if err != nil {
			return nil, fmt.Errorf("rueidislock: %w", err)
		}
		return &rueidisProcess{l: l}, nil
	}
}

func (p *rueidisProcess) mutex(name string) (mutex, error) {
	return &rueidisMutex{l: p.l, name: name}, nil
}
func (p *rueidisProcess) close() error { p.l.Close(); return nil }

type rueidisMutex struct {
	l      rueidislock.Locker
	name   string
	cancel context.CancelFunc
}

func (m *rueidisMutex) lock(ctx context.Context) error {
	_, cancel, err := m.l.WithContext(ctx, m.name)
	if err != nil {
		return err
	}
	m.cancel = cancel
	return nil
}

func (m *rueidisMutex) unlock(context.Context) error {
	if m.cancel == nil {
		return errNotHeld
	}
	m.cancel() // releases the keys and waits for the deletions
	m.cancel = nil
	return nil
}

// --- Redisson-layout floors (scenarios 1-3) --------------------------------
// Not libraries: the least a lock in Redisson's layout sends (see
// internal/floor), retried every floorRetry like the floor; and the same
// with exactly-once last releases (a replay latch), the least rlock's
// guarantees cost on top of the layout. Both show where rlock stands
// against what its data layout and its guarantees cost, before any client
// bookkeeping.

const redissonFloorName = "redisson-floor"

type redissonFloorProcess struct {
	rdb      *redis.Client
	once     bool     // release with RedissonReleaseOnce
	prompt   *workers // nil: acquire on the caller's goroutine
	requests atomic.Int64
}

func openRedissonFloor(once bool) func(context.Context, []string, *runStats) (process, error) {
	return func(_ context.Context, addrs []string, st *runStats) (process, error) {
		return &redissonFloorProcess{rdb: newRedis(addrs[0], st), once: once}, nil
	}
}

// openRedissonFloorPrompt is the exactly-once floor whose lock returns the
// moment ctx ends, as rlock's does: go-redis cannot abandon a read, so each
// acquire whose ctx can end runs on a parked goroutine while the caller
// waits for it or for ctx, and a grant that comes after the caller left is
// given back. It is the least that promptness costs on top of the layout
// and the guarantee: one hand-off to a parked goroutine and one back.
func openRedissonFloorPrompt(_ context.Context, addrs []string, st *runStats) (process, error) {
	return &redissonFloorProcess{rdb: newRedis(addrs[0], st), once: true, prompt: newWorkers()}, nil
}

func (p *redissonFloorProcess) mutex(name string) (mutex, error) {
	owner := randomToken() + ":1" // an owner field: client ID, thread
	return &redissonFloorMutex{p: p, owner: owner,
		keys: []string{name, base.Channel(name), base.DerivedKey(base.LatchPrefix, name) + ":" + owner}}, nil
}

func (p *redissonFloorProcess) close() error {
	if p.prompt != nil {
		p.prompt.close()
	}
	return p.rdb.Close()
}

type redissonFloorMutex struct {
	p     *redissonFloorProcess
	owner string
	keys  []string // the lock, its channel, the owner's latch
}

func (m *redissonFloorMutex) lock(ctx context.Context) error {
	for {
		ok, err := m.acquire(ctx)
		if err != nil || ok {
			return err
		}
		if err := sleepCtx(ctx, floorRetry); err != nil {
			return err
		}
	}
}

// acquire runs the acquire script once: on the calling goroutine, or, for
// a prompt floor and a ctx that can end, on a parked goroutine, returning
// when it answers or ctx ends, whichever comes first. A grant the caller
// did not wait for is released again.
func (m *redissonFloorMutex) acquire(ctx context.Context) (bool, error) {
	if m.p.prompt == nil || ctx.Done() == nil {
		return redissonAcquire(ctx, m.p.rdb, m.keys[0], m.owner)
	}
	type reply struct {
		ok  bool
		err error
	}
	done := make(chan reply, 1)
	var left atomic.Bool // the caller left before the reply
	m.p.prompt.run(func() {
		ok, err := redissonAcquire(context.WithoutCancel(ctx), m.p.rdb, m.keys[0], m.owner)
		if ok && !left.CompareAndSwap(false, true) {
			_ = m.unlock(context.WithoutCancel(ctx)) // the caller left: give it back
			return
		}
		done <- reply{ok, err}
	})
	select {
	case r := <-done:
		return r.ok, r.err
	case <-ctx.Done():
		if left.CompareAndSwap(false, true) {
			return false, ctx.Err()
		}
		r := <-done // granted before ctx ended: the caller holds it
		return r.ok, r.err
	}
}

// promptFloor is the exactly-once floor with a prompt lock (scenarios 1
// and 2, where rlock's cancellable-ctx cost is measured).
var promptFloor = contender{name: redissonFloorName, single: true, open: openRedissonFloorPrompt,
	config: "the same, each acquire on a parked goroutine so that lock returns when ctx ends; a floor, not a library"}

// workers are parked goroutines that run functions handed to them, started
// as needed, as rlock's client keeps.
type workers struct {
	work   chan func()
	closed chan struct{}
}

func newWorkers() *workers { return &workers{work: make(chan func()), closed: make(chan struct{})} }

// run hands f to an idle worker, or starts one.
func (w *workers) run(f func()) {
	select {
	case w.work <- f:
	default:
		go w.loop(f)
	}
}

func (w *workers) loop(f func()) {
	for {
		f()
		select {
		case f = <-w.work:
		case <-w.closed:
			return
		}
	}
}

func (w *workers) close() { close(w.closed) }

func (m *redissonFloorMutex) unlock(ctx context.Context) error {
	var err error
	if m.p.once {
		request := strconv.FormatInt(m.p.requests.Add(1), 36)
		err = floor.RedissonReleaseOnce.Run(ctx, m.p.rdb, m.keys, 0, floorTTL.Milliseconds(), m.owner, request, 60000).Err()
	} else {
		err = floor.RedissonRelease.Run(ctx, m.p.rdb, m.keys[:2], 0, floorTTL.Milliseconds(), m.owner).Err()
	}
	if err == redis.Nil {
		return errNotHeld
	}
	return err
}
