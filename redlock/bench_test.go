package redlock_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock"
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

// timed runs op b.N times, uncontended, and reports its latencies.
func timed(b *testing.B, op func() error) {
	if err := op(); err != nil { // warm up: connections, script cache
		b.Fatal(err)
	}
	lat := make(latencies, 0, 1024)
	for b.Loop() {
		t0 := time.Now()
		if err := op(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	lat.report(b)
}

// floorRelease is the compare-and-delete a SET NX lock releases with.
var floorRelease = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

// BenchmarkAcquireRelease: one goroutine, acquire + release, uncontended,
// on five real redis-servers, in the same run:
//
//   - redlock5: RedLock with a 10 s lease over the five nodes.
//   - redlock5-watchdog: the same in watchdog mode.
//   - reentrant1: a single-node reentrant lock (10 s lease) on node 0.
//   - setnx5: the floor of a parallel-quorum Redlock, which is what
//     redsync does: SET NX PX on the five nodes in parallel, then a
//     compare-and-delete script on each, in parallel.
//
// The redsync comparison itself lives in the benchmarks module (redsync
// must not enter this module's go.mod).
func BenchmarkAcquireRelease(b *testing.B) {
	ctx := context.Background()
	var rdbs []*redis.Client
	var clients []*rlock.Client
	for range 5 {
		s := redistest.StartServer(b)
		rdb := s.NewClient(b)
		rdbs = append(rdbs, rdb)
		c, err := rlock.NewClient(rdb)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	for _, v := range []struct {
		name string
		open func(name string) (rlock.Locker, error)
	}{
		{"redlock5", func(name string) (rlock.Locker, error) {
			return redlock.New(clients, name, redlock.WithLease(10*time.Second))
		}},
		{"redlock5-watchdog", func(name string) (rlock.Locker, error) { return redlock.New(clients, name) }},
		{"reentrant1", func(name string) (rlock.Locker, error) {
			return reentrant.New(clients[0], name, reentrant.WithLease(10*time.Second))
		}},
	} {
		b.Run(v.name, func(b *testing.B) {
			l, err := v.open(redistest.Name(b))
			if err != nil {
				b.Fatal(err)
			}
			timed(b, func() error {
				if err := l.Lock(ctx); err != nil {
					return err
				}
				return l.Unlock(ctx)
			})
		})
	}
	b.Run("setnx5", func(b *testing.B) {
		key := redistest.Name(b)
		all := func(fn func(*redis.Client) error) error {
			errs := make([]error, len(rdbs))
			var wg sync.WaitGroup
			for i, rdb := range rdbs {
				wg.Go(func() { errs[i] = fn(rdb) })
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					return err
				}
			}
			return nil
		}
		timed(b, func() error {
			if err := all(func(rdb *redis.Client) error {
				return rdb.SetNX(ctx, key, "token", 10*time.Second).Err()
			}); err != nil {
				return err
			}
			return all(func(rdb *redis.Client) error {
				return floorRelease.Run(ctx, rdb, []string{key}, "token").Err()
			})
		})
	})
}
