package semaphore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/semaphore"
)

// BenchmarkAcquireRelease: one goroutine, Acquire(1) + Release(1) on a
// semaphore with permits to spare (two script calls per op), on miniredis
// and redis-server. Each op records two operation IDs, kept for the
// replay window: miniredis handles sorted sets in linear time, so its
// figure grows with b.N; redis-server's does not.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, be := range []struct {
		name string
		new  func(testing.TB) *redistest.Backend
	}{{redistest.MiniName, redistest.Mini}, {redistest.RealName, redistest.Real}} {
		b.Run(be.name, func(b *testing.B) {
			backend := be.new(b) // a fresh server per run: the operation record starts empty
			ctx := context.Background()
			c, err := rlock.NewClient(backend.NewClient(b))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			s, err := semaphore.New(c, "bench")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.TrySetPermits(ctx, 10); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := s.Acquire(ctx, 1); err != nil {
					b.Fatal(err)
				}
				if err := s.Release(ctx, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkContended: 4 clients (each its own connection pool and hub) ×
// 8 goroutines taking 1 of 5 permits and giving it back; an op is one
// acquire+release. It reports refused-attempts/release: the wake-ups a
// release costs beyond the one it grants (the herd), on redis-server.
func BenchmarkContended(b *testing.B) {
	const clients, workers, permits = 4, 8, 5
	backend := redistest.Real(b)
	ctx := context.Background()
	sems := make([]*semaphore.Semaphore, clients)
	counters := make([]*attemptCounter, clients)
	for i := range sems {
		rdb := backend.NewClient(b)
		counters[i] = &attemptCounter{}
		rdb.AddHook(counters[i])
		c, err := rlock.NewClient(rdb)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		if sems[i], err = semaphore.New(c, "bench-contended"); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := sems[0].TrySetPermits(ctx, permits); err != nil {
		b.Fatal(err)
	}
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	b.ResetTimer()
	for i := range clients {
		for range workers {
			wg.Go(func() {
				for left.Add(-1) >= 0 {
					if err := sems[i].Acquire(ctx, 1); err != nil {
						b.Error(err)
						return
					}
					if err := sems[i].Release(ctx, 1); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	b.StopTimer()
	var attempts int64
	for _, c := range counters {
		attempts += c.n.Load()
	}
	b.ReportMetric(float64(attempts-int64(b.N))/float64(b.N), "refused/release")
}
