package main

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/floor"
)

// --- RedLock floors (scenario 5) ---------------------------------------------
// Not libraries: the least work a RedLock over five nodes can do, asking
// every node in parallel (with plain goroutines, or with one parked
// goroutine per node, as rlock's RedLock does), no retry bookkeeping, no
// validity check, no error reporting beyond the first. They show where
// redsync and rlock's RedLock stand against what their data layouts cost.
//
//   - SET NX PX + compare-and-delete: redsync's layout (a string key
//     holding a random token).
//   - Redisson layout: a hash of owner fields and hold counts with a
//     PEXPIRE, released with HINCRBY -1 and, on the last hold, DEL and
//     PUBLISH: the least any Redisson-compatible reentrant lock sends (no
//     replay latch, no waiter registration, no client bookkeeping), so the
//     least any Redisson-compatible RedLock costs.
//   - The same with exactly-once last releases (a replay latch per owner,
//     floor.RedissonReleaseOnce): the least a Redisson-compatible RedLock
//     with rlock's guarantee under re-sent releases costs.

// redlockFloorName is the library name of both floors: a floor, kept apart
// from the single-node floor the other ratios are taken against.
const redlockFloorName = "redlock-floor"

// redlockFloorProcess is one client of a RedLock floor: one go-redis
// client per node and, with workers, one parked goroutine per node that
// makes that node's calls (rlock's RedLock hands them to its clients'
// background workers likewise); without, a new goroutine per call.
type redlockFloorProcess struct {
	rdbs     []*redis.Client
	layout   redlockFloorLayout
	work     []chan func() // by node, with workers
	requests atomic.Int64  // request IDs of exactly-once releases
}

// redlockFloorLayout is a RedLock floor's data layout.
type redlockFloorLayout int

const (
	setNXLayout        redlockFloorLayout = iota // SET NX PX + compare-and-delete
	redissonLayout                               // Redisson's hash
	redissonOnceLayout                           // Redisson's hash, exactly-once releases
)

func openRedlockFloor(layout redlockFloorLayout, workers bool) func(context.Context, []string, *runStats) (process, error) {
	return func(_ context.Context, addrs []string, st *runStats) (process, error) {
		p := &redlockFloorProcess{layout: layout}
		for _, a := range addrs {
			p.rdbs = append(p.rdbs, newRedis(a, st))
			if workers {
				w := make(chan func())
				p.work = append(p.work, w)
				go func() {
					for f := range w {
						f()
					}
				}()
			}
		}
		return p, nil
	}
}

func (p *redlockFloorProcess) mutex(name string) (mutex, error) {
	m := &redlockFloorMutex{p: p, keys: []string{name, base.Channel(name)}, token: randomToken()}
	if p.layout != setNXLayout {
		m.token = randomToken() + ":1" // an owner field: client ID, thread
		m.keys = append(m.keys, base.DerivedKey(base.LatchPrefix, name)+":"+m.token)
	}
	return m, nil
}

func (p *redlockFloorProcess) close() error {
	for _, w := range p.work {
		close(w)
	}
	var errs []error
	for _, r := range p.rdbs {
		errs = append(errs, r.Close())
	}
	return errors.Join(errs...)
}

type redlockFloorMutex struct {
	p     *redlockFloorProcess
	keys  []string // the lock, its channel; the owner's latch (Redisson layout)
	token string   // the token (SET NX) or owner field (Redisson layout)
}

// all runs fn on every node in parallel and returns how many succeeded
// and the first error.
func (m *redlockFloorMutex) all(fn func(*redis.Client) (bool, error)) (int, error) {
	oks := make([]bool, len(m.p.rdbs))
	errs := make([]error, len(m.p.rdbs))
	var wg sync.WaitGroup
	for i, rdb := range m.p.rdbs {
		if m.p.work == nil {
			wg.Go(func() { oks[i], errs[i] = fn(rdb) })
			continue
		}
		wg.Add(1)
		m.p.work[i] <- func() {
			defer wg.Done()
			oks[i], errs[i] = fn(rdb)
		}
	}
	wg.Wait()
	n := 0
	for _, ok := range oks {
		if ok {
			n++
		}
	}
	return n, errors.Join(errs...)
}

// lock asks every node once, then retries after floorRetry until a quorum
// granted (uncontended, the first round does).
func (m *redlockFloorMutex) lock(ctx context.Context) error {
	quorum := len(m.p.rdbs)/2 + 1
	for {
		n, err := m.all(func(rdb *redis.Client) (bool, error) {
			if m.p.layout == setNXLayout {
				return rdb.SetNX(ctx, m.keys[0], m.token, floorTTL).Result()
			}
			return redissonAcquire(ctx, rdb, m.keys[0], m.token)
		})
		if err != nil || n >= quorum {
			return err
		}
		if err := m.unlock(ctx); err != nil && !errors.Is(err, errNotHeld) {
			return err
		}
		if err := sleepCtx(ctx, floorRetry); err != nil {
			return err
		}
	}
}

func (m *redlockFloorMutex) unlock(ctx context.Context) error {
	n, err := m.all(func(rdb *redis.Client) (bool, error) {
		if m.p.layout == setNXLayout {
			n, err := floor.CompareAndDelete.Run(ctx, rdb, m.keys[:1], m.token).Int()
			return n == 1, err
		}
		var n int
		var err error
		if m.p.layout == redissonOnceLayout {
			request := strconv.FormatInt(m.p.requests.Add(1), 36)
			n, err = floor.RedissonReleaseOnce.Run(ctx, rdb, m.keys, "0", floorTTL.Milliseconds(), m.token, request, 60000).Int()
		} else {
			n, err = floor.RedissonRelease.Run(ctx, rdb, m.keys[:2], "0", floorTTL.Milliseconds(), m.token).Int()
		}
		if err == redis.Nil {
			return false, nil
		}
		return n >= 0, err
	})
	if err == nil && n < len(m.p.rdbs)/2+1 {
		err = errNotHeld
	}
	return err
}

// redissonAcquire runs the Redisson-layout floor's acquire script once on
// rdb for owner and reports whether it granted the lock (the script replies
// nil for a grant and the lock's PTTL otherwise).
func redissonAcquire(ctx context.Context, rdb *redis.Client, key, owner string) (bool, error) {
	err := floor.RedissonAcquire.Run(ctx, rdb, []string{key}, floorTTL.Milliseconds(), owner).Err()
	if err == redis.Nil {
		return true, nil
	}
	return false, err
}
