package reentrant_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/floor"
	"github.com/rlock-go/rlock/internal/lua"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/reentrant"
)

// BenchmarkClientCost measures what rlock's client adds to an uncontended
// TryLock+Unlock on redis-server: rlock in watchdog mode and with an
// explicit lease, next to a bare go-redis EVALSHA of the very scripts
// rlock sends with the same keys and arguments ("scripts"), the least a
// client can do to run them. The difference in ns/op and allocs/op is
// rlock's client-side bookkeeping; both send two requests per op.
// "exactly-once-floor" is the benchmarks module's exactly-once floor
// (floor.RedissonAcquire and floor.RedissonReleaseOnce, a latch per
// owner), the same way: "scripts" against it is what rlock's scripts cost
// the server beyond the floor's.
func BenchmarkClientCost(b *testing.B) {
	ctx := context.Background()
	be := redistest.Real(b)
	rdb := be.NewClient(b)
	c, err := rlock.NewClient(rdb)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for _, v := range []struct {
		name string
		opts []reentrant.Option
	}{{"rlock-watchdog", nil}, {"rlock-lease", []reentrant.Option{reentrant.WithLease(30 * time.Second)}}} {
		b.Run(v.name, func(b *testing.B) {
			l, err := reentrant.New(c, redistest.Name(b), v.opts...)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if err := l.TryLock(ctx); err != nil {
					b.Fatal(err)
				}
				if err := l.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("scripts", func(b *testing.B) {
		name := redistest.Name(b)
		if err := lua.Lock.Load(ctx, rdb).Err(); err != nil {
			b.Fatal(err)
		}
		if err := lua.Unlock.Load(ctx, rdb).Err(); err != nil {
			b.Fatal(err)
		}
		owner := c.ID() + ":#1"
		lockKeys := []string{name, base.DerivedKey(base.TokenPrefix, name)}
		unlockKeys := []string{name, base.Channel(name), base.DerivedKey(base.LatchPrefix, name), base.Waiters(name)}
		lease := int64(30000)
		n := uint64(0)
		for b.Loop() {
			if err := lua.Lock.EvalSha(ctx, rdb, lockKeys, lease, owner, 0, "0").Err(); err != nil {
				b.Fatal(err)
			}
			n++
			req := "~0123456789abcdefghijklm:" + strconv.FormatUint(n, 36) // as long as a client's request IDs
			if err := lua.Unlock.EvalSha(ctx, rdb, unlockKeys, lease, owner, 1, base.UnlockMessage, int64(60000), "c", req, 2).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("exactly-once-floor", func(b *testing.B) {
		name := redistest.Name(b)
		for _, s := range []*redis.Script{floor.RedissonAcquire, floor.RedissonReleaseOnce} {
			if err := s.Load(ctx, rdb).Err(); err != nil {
				b.Fatal(err)
			}
		}
		owner := c.ID() + ":1"
		keys := []string{name, base.Channel(name), base.DerivedKey(base.LatchPrefix, name) + ":" + owner}
		n := uint64(0)
		for b.Loop() {
			if err := floor.RedissonAcquire.EvalSha(ctx, rdb, keys[:1], int64(30000), owner).Err(); err != redis.Nil {
				b.Fatal(err)
			}
			n++
			req := strconv.FormatUint(n, 36)
			if err := floor.RedissonReleaseOnce.EvalSha(ctx, rdb, keys, base.UnlockMessage, int64(30000), owner, req, int64(60000)).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
