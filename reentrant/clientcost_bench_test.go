package reentrant_test

import (
	"context"
	"strconv"
	"strings"
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
// the server beyond the floor's. server-µs/op is the time redis-server
// spent running the scripts (INFO commandstats), less noisy on a shared
// machine than ns/op.
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
			resetStats(b, rdb)
			for b.Loop() {
				if err := l.TryLock(ctx); err != nil {
					b.Fatal(err)
				}
				if err := l.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
			reportServerTime(b, rdb)
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
		resetStats(b, rdb)
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
		reportServerTime(b, rdb)
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
		resetStats(b, rdb)
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
		reportServerTime(b, rdb)
	})
}

func resetStats(b *testing.B, rdb *redis.Client) {
	if err := rdb.ConfigResetStat(context.Background()).Err(); err != nil {
		b.Fatal(err)
	}
}

// serverUsec returns the time redis-server spent in EVALSHA since the
// last CONFIG RESETSTAT, in µs.
func serverUsec(rdb *redis.Client) float64 {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:")
		if !ok {
			continue
		}
		for _, f := range strings.Split(strings.TrimSpace(rest), ",") {
			if v, ok := strings.CutPrefix(f, "usec="); ok {
				usec, _ := strconv.ParseFloat(v, 64)
				return usec
			}
		}
	}
	return 0
}

// reportServerTime reports the time redis-server spent in EVALSHA per op
// since resetStats.
func reportServerTime(b *testing.B, rdb *redis.Client) {
	b.ReportMetric(serverUsec(rdb)/float64(b.N), "server-µs/op")
}
