package reentrant_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/fair"
	"github.com/rlock-go/rlock/internal/floor"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/reentrant"
)

// countHook counts the commands a go-redis client sends (one per round
// trip for these benchmarks: no pipelines are used).
type countHook struct{ n atomic.Int64 }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

func benchBackends(b *testing.B, fn func(b *testing.B, be *redistest.Backend)) {
	b.Run("miniredis", func(b *testing.B) { fn(b, redistest.Mini(b)) })
	b.Run("redis", func(b *testing.B) { fn(b, redistest.Real(b)) })
}

// BenchmarkUncontended: one goroutine, lock+unlock on one key, next to the
// floor (SET NX PX + compare-and-delete: the least a Redis lock can do) in
// the same run. Goal: 2 round trips per lock+unlock (roundtrips/op).
func BenchmarkUncontended(b *testing.B) {
	benchBackends(b, func(b *testing.B, be *redistest.Backend) {
		ctx := context.Background()
		rdb := be.NewClient(b)
		hook := &countHook{}
		rdb.AddHook(hook)
		c, err := rlock.NewClient(rdb)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		// rlock with a context that cannot end, and with one that can (a
		// request's): then each attempt runs in a goroutine, so that Lock
		// can return the moment the context ends.
		cancellable, cancel := context.WithCancel(ctx)
		defer cancel()
		for _, v := range []struct {
			name string
			ctx  context.Context
		}{{"rlock", ctx}, {"rlock-cancellable-ctx", cancellable}} {
			b.Run(v.name, func(b *testing.B) {
				ctx := v.ctx
				l, _ := reentrant.New(c, redistest.Name(b))
				if err := l.Lock(ctx); err != nil { // load scripts
					b.Fatal(err)
				}
				_ = l.Unlock(ctx)
				hook.n.Store(0)
				for b.Loop() {
					if err := l.Lock(ctx); err != nil {
						b.Fatal(err)
					}
					if err := l.Unlock(ctx); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(hook.n.Load())/float64(b.N), "roundtrips/op")
			})
		}
		b.Run("floor", func(b *testing.B) {
			key := redistest.Name(b)
			_ = floor.CompareAndDelete.Load(ctx, rdb)
			hook.n.Store(0)
			for b.Loop() {
				ok, err := rdb.SetNX(ctx, key, "token", 30*time.Second).Result()
				if err != nil || !ok {
					b.Fatal(ok, err)
				}
				if err := floor.CompareAndDelete.Run(ctx, rdb, []string{key}, "token").Err(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(hook.n.Load())/float64(b.N), "roundtrips/op")
		})
	})
}

// BenchmarkContended: 16 goroutines over 4 clients on one key, a 100 us
// critical section, rlock next to the floor (SET NX PX, retried every 1 ms,
// compare-and-delete) in the same run. Reports grants/s, Redis commands per
// grant (acquire attempts plus the one release), and the share of grants
// that went to another goroutine than the previous holder. A
// mutual-exclusion check runs inside the section.
func BenchmarkContended(b *testing.B) {
	benchBackends(b, func(b *testing.B, be *redistest.Backend) {
		for _, v := range []struct {
			name string
			open func(c *rlock.Client, name string) rlock.Locker
		}{
			{"rlock", func(c *rlock.Client, name string) rlock.Locker { l, _ := reentrant.New(c, name); return l }},
			{"fair", func(c *rlock.Client, name string) rlock.Locker { l, _ := fair.New(c, name); return l }},
		} {
			b.Run(v.name, func(b *testing.B) {
				clients := map[*redis.Client]*rlock.Client{} // one per process, as in production
				contended(b, be, func(rdb *redis.Client, name string) (lock, unlock func(context.Context) error) {
					c := clients[rdb]
					if c == nil {
						var err error
						if c, err = rlock.NewClient(rdb); err != nil {
							b.Fatal(err)
						}
						b.Cleanup(func() { _ = c.Close() })
						clients[rdb] = c
					}
					l := v.open(c, name)
					return l.Lock, l.Unlock
				})
			})
		}
		b.Run("floor", func(b *testing.B) {
			contended(b, be, func(rdb *redis.Client, name string) (lock, unlock func(context.Context) error) {
				token := fmt.Sprint(rand.Uint64())
				lock = func(ctx context.Context) error {
					for {
						ok, err := rdb.SetNX(ctx, name, token, 30*time.Second).Result()
						if err != nil || ok {
							return err
						}
						time.Sleep(time.Millisecond)
					}
				}
				unlock = func(ctx context.Context) error {
					return floor.CompareAndDelete.Run(ctx, rdb, []string{name}, token).Err()
				}
				return lock, unlock
			})
		})
	})
}

type lockPair func(rdb *redis.Client, name string) (lock, unlock func(context.Context) error)

func contended(b *testing.B, be *redistest.Backend, newLock lockPair) {
	ctx := context.Background()
	name := redistest.Name(b)
	hook := &countHook{}
	rdbs := make([]*redis.Client, 4)
	for i := range rdbs {
		rdbs[i] = be.NewClient(b)
		rdbs[i].AddHook(hook)
		_ = floor.CompareAndDelete.Load(ctx, rdbs[i])
	}
	var grants, handoffs, inside, last atomic.Int64
	var relMu sync.Mutex
	var released time.Time        // when the last holder started its Unlock
	var latencies []time.Duration // release to the next grant to another goroutine
	hook.n.Store(0)
	start := time.Now()
	b.ResetTimer()
	var wg sync.WaitGroup
	var remaining atomic.Int64
	remaining.Store(int64(b.N))
	for g := range 16 {
		lock, unlock := newLock(rdbs[g%4], name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for remaining.Add(-1) >= 0 {
				if err := lock(ctx); err != nil {
					b.Error(err)
					return
				}
				if inside.Add(1) != 1 {
					b.Error("two holders at once")
				}
				if last.Swap(int64(g)) != int64(g) {
					handoffs.Add(1)
					now := time.Now()
					relMu.Lock()
					if !released.IsZero() {
						latencies = append(latencies, now.Sub(released))
					}
					relMu.Unlock()
				}
				grants.Add(1)
				spin(100 * time.Microsecond)
				inside.Add(-1)
				relMu.Lock()
				released = time.Now()
				relMu.Unlock()
				if err := unlock(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	elapsed := time.Since(start)
	g := float64(grants.Load())
	b.ReportMetric(g/elapsed.Seconds(), "grants/s")
	b.ReportMetric(float64(hook.n.Load())/g, "cmds/grant")
	b.ReportMetric(float64(handoffs.Load())/g, "handoff-share")
	if len(latencies) > 0 {
		slices.Sort(latencies)
		pct := func(p float64) float64 {
			return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds())
		}
		b.ReportMetric(pct(0.50), "p50-handoff-us")
		b.ReportMetric(pct(0.99), "p99-handoff-us")
	}
}

// spin keeps the goroutine busy for d, like real work (a sleep would hand
// the CPU to the waiters and flatter the numbers).
func spin(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

// BenchmarkRedissonFloor is the least any Redisson-layout lock can do, for
// BenchmarkUncontended's comparison: an acquire script (EXISTS or HEXISTS,
// HINCRBY, PEXPIRE) and a release script (HINCRBY -1, DEL and PUBLISH on
// the last hold), no replay latch, no client bookkeeping.
func BenchmarkRedissonFloor(b *testing.B) {
	benchBackends(b, func(b *testing.B, be *redistest.Backend) {
		ctx := context.Background()
		rdb := be.NewClient(b)
		key := redistest.Name(b)
		keys := []string{key, "redisson_lock__channel:{" + key + "}"}
		_ = floor.RedissonAcquire.Load(ctx, rdb)
		_ = floor.RedissonRelease.Load(ctx, rdb)
		for b.Loop() {
			if err := floor.RedissonAcquire.Run(ctx, rdb, keys[:1], 30000, "owner").Err(); err != nil && err != redis.Nil {
				b.Fatal(err)
			}
			if err := floor.RedissonRelease.Run(ctx, rdb, keys, 0, 30000, "owner").Err(); err != nil && err != redis.Nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkParallel: 64 goroutines, each on its own key, lock+unlock
// through one client with WithAutoPipeline (the configuration the README
// recommends for many goroutines), with a context that cannot end and
// with one that can (a request's: each Lock gets a context.WithTimeout).
// ns/op is per lock+unlock pair over all goroutines.
func BenchmarkParallel(b *testing.B) {
	benchBackends(b, func(b *testing.B, be *redistest.Backend) {
		c, err := rlock.NewClient(be.NewClient(b), rlock.WithAutoPipeline())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		for _, cancellable := range []bool{false, true} {
			name := "auto-pipeline"
			if cancellable {
				name += "-cancellable-ctx"
			}
			b.Run(name, func(b *testing.B) {
				b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
				base := redistest.Name(b)
				var next atomic.Int64
				b.RunParallel(func(pb *testing.PB) {
					l, err := reentrant.New(c, fmt.Sprintf("%s:%d", base, next.Add(1)))
					if err != nil {
						b.Error(err)
						return
					}
					for pb.Next() {
						ctx, cancel := context.Background(), context.CancelFunc(func() {})
						if cancellable {
							ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
						}
						err := l.Lock(ctx)
						cancel()
						if err == nil {
							err = l.Unlock(context.Background())
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	})
}
