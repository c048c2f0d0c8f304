package redlock_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/floor"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/redlock"
	"github.com/rlock-go/rlock/reentrant"
)

// latencies records one duration per operation and reports p50 and p99.
type latencies []time.Duration

func (l *latencies) report(b *testing.B) {
	if len(*l) == 0 {
		return
	}
	s := slices.Clone(*l)
	slices.Sort(s)
	pct := func(p int) float64 { return float64(s[(len(s)-1)*p/100].Microseconds()) }
	b.ReportMetric(pct(50), "p50-µs")
	b.ReportMetric(pct(99), "p99-µs")
}

// nodes are the benchmark's redis-servers, with a client on each.
type nodes struct {
	rdbs []*redis.Client
}

// serverCPU returns the CPU time (user + system) the servers used so far,
// from INFO cpu, and how much of it went to running commands (the usec of
// INFO commandstats; the rest is the servers' networking and event loop).
func (n nodes) serverCPU(b *testing.B) (all, commands time.Duration) {
	for _, rdb := range n.rdbs {
		info, err := rdb.Info(context.Background(), "cpu", "commandstats").Result()
		if err != nil {
			b.Fatal(err)
		}
		for line := range strings.SplitSeq(info, "\n") {
			k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
			switch {
			case !ok:
			case k == "used_cpu_sys" || k == "used_cpu_user":
				s, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatalf("INFO cpu: %q: %v", line, err)
				}
				all += time.Duration(s * float64(time.Second))
			case strings.HasPrefix(k, "cmdstat_"):
				for f := range strings.SplitSeq(v, ",") {
					if us, ok := strings.CutPrefix(f, "usec="); ok {
						d, err := strconv.ParseInt(us, 10, 64)
						if err != nil {
							b.Fatalf("INFO commandstats: %q: %v", line, err)
						}
						commands += time.Duration(d) * time.Microsecond
					}
				}
			}
		}
	}
	return all, commands
}

// timed runs op b.N times, uncontended, and reports its latencies, the
// allocations, and the CPU time the client process and the servers spent
// per operation (on one CPU, taskset -c 1, their sum is about the wall
// time: what the client spends is what the servers wait for).
func timed(b *testing.B, n nodes, op func() error) {
	if err := op(); err != nil { // warm up: connections, script cache
		b.Fatal(err)
	}
	b.ReportAllocs()
	lat := make(latencies, 0, 1024)
	client0 := processCPU()
	server0, commands0 := n.serverCPU(b)
	for b.Loop() {
		t0 := time.Now()
		if err := op(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	client := processCPU() - client0
	server, commands := n.serverCPU(b)
	server, commands = server-server0, commands-commands0
	lat.report(b)
	if client > 0 {
		b.ReportMetric(float64(client.Microseconds())/float64(len(lat)), "client-cpu-µs/op")
	}
	b.ReportMetric(float64(server.Microseconds())/float64(len(lat)), "server-cpu-µs/op")
	b.ReportMetric(float64(commands.Microseconds())/float64(len(lat)), "server-cmd-µs/op")
}

// all runs fn on every node in parallel, a new goroutine each, and
// returns the first error.
func (n nodes) all(fn func(*redis.Client) error) error {
	return n.allOn(nil, fn)
}

// allOn is all with fn run on the parked worker goroutines work, one per
// node (see workers), instead of new ones when work is not nil.
func (n nodes) allOn(work []chan func(), fn func(*redis.Client) error) error {
	errs := make([]error, len(n.rdbs))
	var wg sync.WaitGroup
	for i, rdb := range n.rdbs {
		if work == nil {
			wg.Go(func() { errs[i] = fn(rdb) })
			continue
		}
		wg.Add(1)
		work[i] <- func() {
			defer wg.Done()
			errs[i] = fn(rdb)
		}
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkAcquireRelease: one goroutine, acquire + release, uncontended,
// on five real redis-servers, in the same run:
//
//   - redlock5: RedLock with a 10 s lease over the five nodes.
//   - redlock5-watchdog: the same in watchdog mode.
//   - redlock5-watchdog-ctx: the same under a ctx with a 10 s deadline,
//     as the benchmarks module's scenario 5 calls it (per-node wait 2 s).
//   - reentrant1: a single-node reentrant lock (10 s lease) on node 0.
//   - setnx5: the floor of a parallel-quorum Redlock, which is what
//     redsync does: SET NX PX on the five nodes in parallel, then a
//     compare-and-delete script on each, in parallel.
//   - redisson5-floor: the floor of a RedLock over Redisson-layout
//     locks: the least Redisson-layout acquire and release scripts
//     (floor.RedissonAcquire, floor.RedissonRelease) on the five nodes in parallel,
//     with plain goroutines and nothing else. Not a lock library: what
//     any Redisson-compatible RedLock costs at least.
//   - redisson5-floor-workers: the same with one parked goroutine per
//     node making its calls, as rlock's RedLock has its nodes' calls made
//     by their clients' background workers: the floor of rlock's design.
//   - redisson5-once-floor-workers: the same with exactly-once last
//     releases (floor.RedissonReleaseOnce, a replay latch per owner): the
//     floor of rlock's design with rlock's guarantee under re-sent
//     releases.
//
// The redsync comparison itself lives in the benchmarks module (redsync
// must not enter this module's go.mod).
func BenchmarkAcquireRelease(b *testing.B) {
	var n nodes
	var clients []*rlock.Client
	for range 5 {
		s := redistest.StartServer(b)
		rdb := s.NewClient(b)
		n.rdbs = append(n.rdbs, rdb)
		c, err := rlock.NewClient(rdb)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	for _, v := range []struct {
		name     string
		deadline bool
		open     func(name string) (rlock.Locker, error)
	}{
		{"redlock5", false, func(name string) (rlock.Locker, error) {
			return redlock.New(clients, name, redlock.WithLease(10*time.Second))
		}},
		{"redlock5-watchdog", false, func(name string) (rlock.Locker, error) { return redlock.New(clients, name) }},
		{"redlock5-watchdog-ctx", true, func(name string) (rlock.Locker, error) { return redlock.New(clients, name) }},
		{"reentrant1", false, func(name string) (rlock.Locker, error) {
			return reentrant.New(clients[0], name, reentrant.WithLease(10*time.Second))
		}},
	} {
		b.Run(v.name, func(b *testing.B) {
			l, err := v.open(redistest.Name(b))
			if err != nil {
				b.Fatal(err)
			}
			timed(b, n, func() error {
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if v.deadline {
					ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
				}
				defer cancel()
				if err := l.Lock(ctx); err != nil {
					return err
				}
				return l.Unlock(ctx)
			})
		})
	}
	ctx := context.Background()
	b.Run("setnx5", func(b *testing.B) {
		key := redistest.Name(b)
		timed(b, n, func() error {
			if err := n.all(func(rdb *redis.Client) error {
				return rdb.SetNX(ctx, key, "token", 10*time.Second).Err()
			}); err != nil {
				return err
			}
			return n.all(func(rdb *redis.Client) error {
				return floor.CompareAndDelete.Run(ctx, rdb, []string{key}, "token").Err()
			})
		})
	})
	b.Run("redisson5-floor", func(b *testing.B) { redissonFloor(b, n, nil, false) })
	b.Run("redisson5-floor-workers", func(b *testing.B) { redissonFloor(b, n, workers(b, len(n.rdbs)), false) })
	b.Run("redisson5-once-floor-workers", func(b *testing.B) { redissonFloor(b, n, workers(b, len(n.rdbs)), true) })
}

// workers starts n parked goroutines, each running the functions sent on
// its channel, until b ends.
func workers(b *testing.B, n int) []chan func() {
	work := make([]chan func(), n)
	for i := range work {
		work[i] = make(chan func())
		go func() {
			for f := range work[i] {
				f()
			}
		}()
		b.Cleanup(func() { close(work[i]) })
	}
	return work
}

// redissonFloor is the redisson5-floor benchmarks: on the workers work,
// or in new goroutines when work is nil; with exactly-once releases if
// once.
func redissonFloor(b *testing.B, n nodes, work []chan func(), once bool) {
	ctx := context.Background()
	key := redistest.Name(b)
	const lease, owner = 10000, "client:1"
	keys := []string{key, base.Channel(key), base.DerivedKey(base.LatchPrefix, key) + ":" + owner}
	var request atomic.Int64
	timed(b, n, func() error {
		if err := n.allOn(work, func(rdb *redis.Client) error {
			err := floor.RedissonAcquire.Run(ctx, rdb, keys[:1], lease, owner).Err()
			if err == redis.Nil {
				return nil
			}
			if err == nil {
				err = rlock.ErrNotObtained
			}
			return err
		}); err != nil {
			return err
		}
		id := strconv.FormatInt(request.Add(1), 36)
		return n.allOn(work, func(rdb *redis.Client) error {
			if once {
				return floor.RedissonReleaseOnce.Run(ctx, rdb, keys, 0, lease, owner, id, 60000).Err()
			}
			return floor.RedissonRelease.Run(ctx, rdb, keys[:2], 0, lease, owner).Err()
		})
	})
}
