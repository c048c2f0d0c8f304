package semaphore_test

import (
	"context"
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
