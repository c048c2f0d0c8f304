package inspect_test

import (
	"context"
	"errors"
	"github.com/rlock-go/rlock/internal/base"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/fair"
	"github.com/rlock-go/rlock/internal/inspect"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/reentrant"
	"github.com/rlock-go/rlock/rwlock"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestReadFree(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rdb := b.NewClient(t)
		now := time.Now()
		r, err := inspect.Read(context.Background(), rdb, "inspect-free", now)
		require.NoError(t, err)
		require.False(t, r.Locked)
		require.Empty(t, r.Holders)
		require.False(t, r.HasToken)
		require.Empty(t, r.Queue)
		require.Zero(t, r.Subscribers)
		require.Equal(t, now, r.Time)
		require.Equal(t, base.Channel("inspect-free"), r.Channel)
	})
}

func TestReadHeld(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.NewClient(t)
		c, err := rlock.NewClient(rdb, rlock.WithClientID("client-a"))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		const name = "inspect-held"
		ctx = rlock.WithOwner(ctx, "worker-1")
		l, err := reentrant.New(c, name, reentrant.WithLease(time.Minute))
		require.NoError(t, err)
		require.NoError(t, l.Lock(ctx))
		require.NoError(t, l.Lock(ctx))

		// A fencing token and a fair queue of two waiters, written by hand
		// (the layout is Redisson's): the first is overdue, the second waits.
		now := time.Now()
		k := inspect.KeysOf(name)
		require.NoError(t, rdb.Set(ctx, k.Token, 17, 0).Err())
		require.NoError(t, rdb.RPush(ctx, k.Queue, "client-b:w1", "client-c:w2", "client-d:w3").Err())
		require.NoError(t, rdb.ZAdd(ctx, k.Timeout,
			redis.Z{Member: "client-b:w1", Score: float64(now.Add(-time.Second).UnixMilli())},
			redis.Z{Member: "client-c:w2", Score: float64(now.Add(12 * time.Second).UnixMilli())},
		).Err())

		// One client waits on the lock channel, one on the second waiter's.
		ps := rdb.Subscribe(ctx, base.Channel(name), inspect.WaiterChannel(name, "client-c:w2"))
		t.Cleanup(func() { _ = ps.Close() })
		for range 2 {
			_, err := ps.Receive(ctx)
			require.NoError(t, err)
		}

		r, err := inspect.Read(ctx, rdb, name, now)
		require.NoError(t, err)
		require.True(t, r.Locked)
		require.Equal(t, []inspect.Holder{{Field: "client-a:worker-1", ClientID: "client-a", OwnerID: "worker-1", Holds: 2}}, r.Holders)
		require.True(t, r.Expires)
		require.Greater(t, r.TTL, 50*time.Second)
		require.LessOrEqual(t, r.TTL, time.Minute)
		require.True(t, r.HasToken)
		require.EqualValues(t, 17, r.Token)
		require.EqualValues(t, 1, r.Subscribers)
		require.Len(t, r.Queue, 3)

		w := r.Queue[0]
		require.Equal(t, "client-b:w1", w.Field)
		require.True(t, w.HasDeadline)
		require.True(t, w.Overdue(now))
		require.Zero(t, w.Subscribers)

		w = r.Queue[1]
		require.Equal(t, "client-c:w2", w.Field)
		require.Equal(t, now.Add(12*time.Second).UnixMilli(), w.Deadline.UnixMilli())
		require.False(t, w.Overdue(now))
		require.EqualValues(t, 1, w.Subscribers)
		require.Equal(t, base.Channel(name)+":client-c:w2", w.Channel)

		require.False(t, r.Queue[2].HasDeadline)
		require.False(t, r.Queue[2].Overdue(now))
		require.NoError(t, l.Unlock(ctx))
		require.NoError(t, l.Unlock(ctx))
	})
}

func TestReadNoExpiry(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.NewClient(t)
		// Owner-shaped, but every lock has a TTL: not a lock.
		require.NoError(t, rdb.HSet(ctx, "inspect-noexp", "x:1", 1).Err())
		_, err := inspect.Read(ctx, rdb, "inspect-noexp", time.Now())
		require.ErrorIs(t, err, inspect.ErrNotALock)
	})
}

func TestReadRedissonReadWriteLock(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.NewClient(t)
		require.NoError(t, rdb.HSet(ctx, "inspect-rw", "mode", "read", "java-1:7", 2, "java-2:9", 1).Err())
		require.NoError(t, rdb.PExpire(ctx, "inspect-rw", time.Minute).Err())
		r, err := inspect.Read(ctx, rdb, "inspect-rw", time.Now())
		require.NoError(t, err)
		require.Equal(t, "read", r.Mode)
		require.Equal(t, []inspect.Holder{
			{Field: "java-1:7", ClientID: "java-1", OwnerID: "7", Holds: 2},
			{Field: "java-2:9", ClientID: "java-2", OwnerID: "9", Holds: 1},
		}, r.Holders)
	})
}

func TestReadHashTagName(t *testing.T) {
	k := inspect.KeysOf("{orders}:42")
	require.Equal(t, inspect.Keys{
		Lock:    "{orders}:42",
		Token:   base.TokenPrefix + ":{orders}:42",
		Queue:   base.QueuePrefix + ":{orders}:42",
		Timeout: base.TimeoutPrefix + ":{orders}:42",

		WriterWait: base.WriterWaitPrefix + ":{orders}:42",
	}, k)
	require.Equal(t, base.QueuePrefix+":{a}", inspect.KeysOf("a").Queue)
}

func TestReadBadInput(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.NewClient(t)
		_, err := inspect.Read(ctx, rdb, "", time.Now())
		require.ErrorIs(t, err, rlock.ErrInvalidArgument)
		_, err = inspect.Read(ctx, nil, "x", time.Now())
		require.ErrorIs(t, err, rlock.ErrInvalidArgument)

		require.NoError(t, rdb.Set(ctx, "inspect-string", "v", 0).Err())
		_, err = inspect.Read(ctx, rdb, "inspect-string", time.Now())
		require.ErrorIs(t, err, inspect.ErrNotALock)
		require.ErrorContains(t, err, "string")

		require.NoError(t, rdb.HSet(ctx, "inspect-badcount", "x:1", "many").Err())
		require.NoError(t, rdb.PExpire(ctx, "inspect-badcount", time.Minute).Err())
		_, err = inspect.Read(ctx, rdb, "inspect-badcount", time.Now())
		require.ErrorIs(t, err, inspect.ErrNotALock)

		k := inspect.KeysOf("inspect-badqueue")
		require.NoError(t, rdb.Set(ctx, k.Queue, "v", 0).Err())
		_, err = inspect.Read(ctx, rdb, "inspect-badqueue", time.Now())
		require.ErrorIs(t, err, inspect.ErrNotALock)

		k = inspect.KeysOf("inspect-badtoken")
		require.NoError(t, rdb.Set(ctx, k.Token, "abc", 0).Err())
		_, err = inspect.Read(ctx, rdb, "inspect-badtoken", time.Now())
		require.ErrorIs(t, err, rlock.ErrUnexpectedReply)
		require.NoError(t, rdb.Del(ctx, k.Token).Err())
		require.NoError(t, rdb.HSet(ctx, k.Token, "a", "b").Err())
		_, err = inspect.Read(ctx, rdb, "inspect-badtoken", time.Now())
		require.ErrorIs(t, err, inspect.ErrNotALock)
	})
}

func TestReadUnreachable(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second})
	defer rdb.Close()
	_, err := inspect.Read(context.Background(), rdb, "x", time.Now())
	require.Error(t, err)
	require.False(t, errors.Is(err, inspect.ErrNotALock))
}

// TestReadRWLock: readers of an rlock read-write lock with their own
// leases, a dead reader (its timeout keys gone) with none, and a waiting
// writer from the writer-wait set; the channel is the read-write one.
func TestReadRWLock(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		rdb := b.NewClient(t)
		c, err := rlock.NewClient(rdb)
		require.NoError(t, err)
		defer c.Close()
		name := redistest.Name(t)
		short, err := rwlock.New(c, name, rwlock.WithLease(time.Minute))
		require.NoError(t, err)
		long, err := rwlock.New(c, name, rwlock.WithLease(time.Hour))
		require.NoError(t, err)
		require.NoError(t, short.ReadLock().Lock(ctx))
		require.NoError(t, long.ReadLock().Lock(ctx))
		require.NoError(t, long.ReadLock().Lock(ctx))
		// A reader without timeout keys: gone (a writer's attempt prunes it).
		require.NoError(t, rdb.HSet(ctx, name, "java-1:7", 1).Err())
		now := time.Now()
		r, err := inspect.Read(ctx, rdb, name, now)
		require.NoError(t, err)
		require.Equal(t, "read", r.Mode)
		require.Equal(t, base.RWChannel(name), r.Channel)
		require.Len(t, r.Holders, 3)
		leases := map[string]time.Duration{}
		for _, h := range r.Holders {
			require.False(t, h.Writer)
			leases[h.Field] = h.Lease
		}
		so, _ := short.ReadLock().Owner(ctx)
		lo, _ := long.ReadLock().Owner(ctx)
		require.Zero(t, leases["java-1:7"], "gone")
		require.InDelta(t, time.Minute, leases[so], float64(10*time.Second))
		require.Greater(t, leases[lo], 59*time.Minute)
		require.Empty(t, r.WaitingWriters)

		w, err := rwlock.New(c, name)
		require.NoError(t, err)
		wctx, stop := context.WithCancel(ctx)
		wrote := make(chan error, 1)
		go func() { wrote <- w.WriteLock().Lock(wctx) }()
		require.Eventually(t, func() bool {
			ws, err := w.WaitingWriters(ctx)
			return err == nil && len(ws) == 1
		}, 10*time.Second, time.Millisecond)
		now = time.Now()
		r, err = inspect.Read(ctx, rdb, name, now)
		require.NoError(t, err)
		require.Len(t, r.Holders, 2, "the writer pruned the gone reader")
		wo, _ := w.WriteLock().Owner(ctx)
		require.Len(t, r.WaitingWriters, 1)
		require.Equal(t, base.WriterField(wo), r.WaitingWriters[0].Field)
		require.False(t, r.WaitingWriters[0].Overdue(now))
		require.Positive(t, r.Subscribers, "the writer waits on the read-write channel")

		stop()
		require.ErrorIs(t, <-wrote, context.Canceled)
		require.NoError(t, short.ReadLock().Unlock(ctx))
		require.NoError(t, long.ReadLock().Unlock(ctx))
		require.NoError(t, long.ReadLock().Unlock(ctx))
	})
}

// Regression: Read took any hash for a lock. A plain hash session:1 =
// {user:42: 1} without TTL was reported held ("no expiry") and the rlock
// command force-unlocked (deleted) it; pageviews = {home: 10, about: 3}
// was "held, no expiry, 2 holders". A key is a lock only when it has a
// lock's shape: owner fields with positive integer hold counts (a
// read-write lock's mode and writer fields besides) and a TTL.
func TestPlainHashIsNotALock(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.NewClient(t)
		for _, tc := range []struct {
			key    string
			fields []any
			ttl    time.Duration // 0: none
			why    string
		}{
			{"session:1", []any{"user:42", 1}, 0, "no TTL"},
			{"pageviews", []any{"home", 10, "about", 3}, 0, "no TTL"},
			{"pageviews-ttl", []any{"home", 10, "about", 3}, time.Minute, `field "about"`},
			{"owner-shaped-no-ttl", []any{"6f1c1f5e-2b7a-4a59-9a55-3c1d0b0c8f11:1", 1}, 0, "no TTL"},
			{"bad-count", []any{"x:1", "many"}, time.Minute, `"many"`},
			{"zero-count", []any{"x:1", 0}, time.Minute, `"0"`},
			{"bad-mode", []any{"mode", "exclusive", "x:1", 1}, time.Minute, `"exclusive"`},
			{"writer-in-read-mode", []any{"mode", "read", "x:1:write", 1}, time.Minute, `"x:1:write"`},
			{"mode-only", []any{"mode", "read"}, time.Minute, "no holder"},
			{"empty-client", []any{":1", 1}, time.Minute, `field ":1"`},
		} {
			require.NoError(t, rdb.HSet(ctx, tc.key, tc.fields...).Err())
			if tc.ttl > 0 {
				require.NoError(t, rdb.PExpire(ctx, tc.key, tc.ttl).Err())
			}
			_, err := inspect.Read(ctx, rdb, tc.key, time.Now())
			require.ErrorIs(t, err, inspect.ErrNotALock, tc.key)
			require.ErrorContains(t, err, tc.why, tc.key)
		}
	})
}

// Real locks of every kind, rlock's and Redisson's (written by hand in
// Redisson's layout, "<UUID>:<threadId>"), are still locks.
func TestEveryLockKindIsALock(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.NewClient(t)
		for _, name := range heldLocks(t, rdb) {
			r, err := inspect.Read(ctx, rdb, name, time.Now())
			require.NoError(t, err, name)
			require.True(t, r.Locked, name)
			require.True(t, r.Expires, name)
			require.NotEmpty(t, r.Holders, name)
		}
	})
}

// heldLocks takes a lock of every kind and returns their names.
func heldLocks(t *testing.T, rdb redis.UniversalClient) []string {
	t.Helper()
	ctx := rlock.WithOwner(context.Background(), "worker:7") // an owner ID with a colon
	c, err := rlock.NewClient(rdb)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	name := redistest.Name(t)
	re, err := reentrant.New(c, name+":reentrant")
	require.NoError(t, err)
	require.NoError(t, re.Lock(ctx))
	handle, err := reentrant.New(c, name+":handle") // the handle's own owner ID
	require.NoError(t, err)
	require.NoError(t, handle.Lock(context.Background()))
	fl, err := fair.New(c, name+":fair")
	require.NoError(t, err)
	require.NoError(t, fl.Lock(ctx))
	rd, err := rwlock.New(c, name+":read")
	require.NoError(t, err)
	require.NoError(t, rd.ReadLock().Lock(ctx))
	wr, err := rwlock.New(c, name+":write")
	require.NoError(t, err)
	require.NoError(t, wr.WriteLock().Lock(ctx))
	require.NoError(t, wr.ReadLock().Lock(ctx)) // a downgrade: writer and reader
	t.Cleanup(func() {
		_ = re.Unlock(ctx)
		_ = handle.Unlock(context.Background())
		_ = fl.Unlock(ctx)
		_ = rd.ReadLock().Unlock(ctx)
		_ = wr.ReadLock().Unlock(ctx)
		_ = wr.WriteLock().Unlock(ctx)
	})
	const java = "6f1c1f5e-2b7a-4a59-9a55-3c1d0b0c8f11:1"
	require.NoError(t, rdb.HSet(ctx, name+":redisson", java, 2).Err())
	require.NoError(t, rdb.PExpire(ctx, name+":redisson", time.Minute).Err())
	require.NoError(t, rdb.HSet(ctx, name+":redisson-rw", "mode", "write", java+":write", 1, java, 1).Err())
	require.NoError(t, rdb.PExpire(ctx, name+":redisson-rw", time.Minute).Err())
	var names []string
	for _, kind := range []string{"reentrant", "handle", "fair", "read", "write", "redisson", "redisson-rw"} {
		names = append(names, name+":"+kind)
	}
	return names
}
