package inspect_test

import (
	"context"
	"encoding/hex"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/inspect"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/latch"
	"github.com/rlock-go/rlock/semaphore"
)

// A bare count (a string key holding an integer, nothing around it) is
// read as a count that may be either a semaphore's or a latch's.
func TestReadCountOfUnknownKind(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.Universal(t)
		name := redistest.Name(t)
		require.NoError(t, rdb.Set(ctx, name, "3", 0).Err())
		r, err := inspect.Read(ctx, rdb, name, time.Now())
		require.NoError(t, err)
		require.NotNil(t, r.Count)
		require.False(t, r.Locked)
		require.Equal(t, int64(3), r.Count.Value)
		require.Equal(t, inspect.CountUnknown, r.Count.Kind)
		require.Equal(t, "semaphore or count-down latch", r.Count.Kind.String())
	})
}

// A string that is not an integer is neither a lock nor a count.
func TestReadRefusesNonIntegerString(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.Universal(t)
		name := redistest.Name(t)
		require.NoError(t, rdb.Set(ctx, name, "hello", 0).Err())
		_, err := inspect.Read(ctx, rdb, name, time.Now())
		require.ErrorIs(t, err, inspect.ErrNotALock)
		require.ErrorContains(t, err, "neither a lock nor a semaphore's or count-down latch's count")
	})
}

// Objects made by packages semaphore and latch are told apart by what
// surrounds the count: the expirable semaphore's held permits (IDs as
// callers see them, leases, Redisson's no-lease score), the operation
// records of the counting semaphore and the latch.
func TestReadSemaphoresAndLatch(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.Universal(t)
		c, err := rlock.NewClient(b.NewClient(t))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		name := redistest.Name(t)

		s, err := semaphore.New(c, name+"-sem")
		require.NoError(t, err)
		_, err = s.TrySetPermits(ctx, 5)
		require.NoError(t, err)
		require.NoError(t, s.Acquire(ctx, 2))
		r, err := inspect.Read(ctx, rdb, s.Name(), time.Now())
		require.NoError(t, err)
		require.Equal(t, &inspect.Count{Value: 3, Kind: inspect.CountSemaphore,
			SemaphoreChannel: "redisson_sc:{" + s.Name() + "}", LatchChannel: base.LatchChannel(s.Name()),
			Timeout: "{" + s.Name() + "}:timeout", SemaphoreOps: "{" + s.Name() + "}:rlock_ops", LatchOps: base.LatchOps(s.Name()),
		}, r.Count)

		e, err := semaphore.NewExpirable(c, name+"-exp")
		require.NoError(t, err)
		_, err = e.TrySetPermits(ctx, 3)
		require.NoError(t, err)
		start := time.Now()
		leased, err := e.Acquire(ctx, semaphore.WithLease(time.Minute))
		require.NoError(t, err)
		watched, err := e.Acquire(ctx)
		require.NoError(t, err)
		// A permit Redisson took without a lease: its no-lease score.
		raw := []byte("0123456789abcdef")
		require.NoError(t, rdb.ZAdd(ctx, "{"+e.Name()+"}:timeout", redis.Z{Score: semaphore.NoLeaseScore, Member: string(raw)}).Err())
		require.NoError(t, rdb.DecrBy(ctx, e.Name(), 1).Err())
		r, err = inspect.Read(ctx, rdb, e.Name(), time.Now())
		require.NoError(t, err)
		require.Equal(t, inspect.CountExpirable, r.Count.Kind)
		require.Equal(t, int64(0), r.Count.Value)
		require.Len(t, r.Count.Permits, 3)
		byID := map[string]inspect.Permit{}
		for _, p := range r.Count.Permits {
			require.Len(t, p.ID, 32)
			byID[p.ID] = p
		}
		require.True(t, byID[hex.EncodeToString(raw)].NoLease)
		require.WithinDuration(t, start.Add(time.Minute), byID[leased.ID()].Expiry, 5*time.Second)
		require.False(t, byID[watched.ID()].NoLease)
		require.True(t, byID[watched.ID()].Expiry.After(start), "a watchdog permit has an expiry that is pushed back")
		require.Equal(t, hex.EncodeToString(raw), r.Count.Permits[2].ID, "first to expire first")

		l, err := latch.New(c, name+"-latch")
		require.NoError(t, err)
		_, err = l.TrySetCount(ctx, 4)
		require.NoError(t, err)
		require.NoError(t, l.CountDown(ctx))
		r, err = inspect.Read(ctx, rdb, l.Name(), time.Now())
		require.NoError(t, err)
		require.Equal(t, inspect.CountLatch, r.Count.Kind)
		require.Equal(t, int64(3), r.Count.Value)
	})
}
