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
// and redis-server.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, be := range []func(testing.TB) *redistest.Backend{redistest.Mini, redistest.Real} {
		backend := be(b)
		b.Run(backend.Name, func(b *testing.B) {
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
