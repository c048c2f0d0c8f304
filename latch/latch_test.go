package latch_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/lua"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/latch"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(redistest.StopSharedAfter(m))
}

func clientOn(t testing.TB, rdb rlock.Redis, opts ...rlock.ClientOption) *rlock.Client {
	t.Helper()
	c, err := rlock.NewClient(rdb, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func newLatch(t testing.TB, c *rlock.Client, name string, opts ...latch.Option) *latch.Latch {
	t.Helper()
	l, err := latch.New(c, name, opts...)
	require.NoError(t, err)
	return l
}

func TestBadInput(t *testing.T) {
	c := clientOn(t, redistest.Mini(t).Universal(t))
	_, err := latch.New(nil, "x")
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	_, err = latch.New(c, "")
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	_, err = latch.New(c, "x", latch.WithPoll(0))
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	l := newLatch(t, c, "x")
	for _, n := range []int64{0, -1} {
		_, err = l.TrySetCount(context.Background(), n)
		require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	}
}

func TestWrongType(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.Universal(t)
		c := clientOn(t, rdb)
		hash, text := redistest.Name(t), redistest.Name(t)
		require.NoError(t, rdb.HSet(ctx, hash, "f", "1").Err())
		require.NoError(t, rdb.Set(ctx, text, "abc", 0).Err())
		for _, name := range []string{hash, text} {
			l := newLatch(t, c, name)
			_, err := l.TrySetCount(ctx, 3)
			require.ErrorIs(t, err, rlock.ErrWrongType)
			require.ErrorIs(t, l.CountDown(ctx), rlock.ErrWrongType)
			_, err = l.Count(ctx)
			require.ErrorIs(t, err, rlock.ErrWrongType)
			require.ErrorIs(t, l.Await(ctx), rlock.ErrWrongType)
			_, err = l.Delete(ctx)
			require.ErrorIs(t, err, rlock.ErrWrongType)
		}
		require.Equal(t, "1", rdb.HGet(ctx, hash, "f").Val(), "left alone")
		require.Equal(t, "abc", rdb.Get(ctx, text).Val(), "left alone")
	})
}

func TestCountDownLifecycle(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.Universal(t)
		l := newLatch(t, clientOn(t, rdb), redistest.Name(t))
		require.NoError(t, l.Await(ctx), "no count: returns at once")
		ok, err := l.TrySetCount(ctx, 2)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "2", rdb.Get(ctx, l.Name()).Val(), "Redisson's layout: a decimal string")
		ok, err = l.TrySetCount(ctx, 5)
		require.NoError(t, err)
		require.False(t, ok, "a count is there")
		require.NoError(t, l.CountDown(ctx))
		n, err := l.Count(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		require.NoError(t, l.CountDown(ctx))
		require.Zero(t, rdb.Exists(ctx, l.Name()).Val(), "deleted at zero")
		require.NoError(t, l.CountDown(ctx), "no count: nothing to do")
		require.NoError(t, l.Await(ctx))
		// A stored 0 counts as no count.
		require.NoError(t, rdb.Set(ctx, l.Name(), "0", 0).Err())
		ok, err = l.TrySetCount(ctx, 1)
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = l.Delete(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = l.Delete(ctx)
		require.NoError(t, err)
		require.False(t, ok)
	})
}

// awaitAll starts n Await calls on ls (round robin) and returns their results.
func awaitAll(ctx context.Context, ls []*latch.Latch, n int) <-chan error {
	out := make(chan error, n)
	for i := range n {
		go func() { out <- ls[i%len(ls)].Await(ctx) }()
	}
	return out
}

// waiting blocks until the clients have n waiters in all.
func waiting(t *testing.T, cs []*rlock.Client, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		sum := 0
		for _, c := range cs {
			sum += c.Waiters().Waiters
		}
		return sum == n
	}, 10*time.Second, time.Millisecond)
}

// Many waiters on three clients are all released by the last CountDown,
// through the "0" message (the poll is far beyond the test's deadline).
func TestManyWaitersAcrossClients(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		name := redistest.Name(t)
		var cs []*rlock.Client
		var ls []*latch.Latch
		for range 3 {
			c := clientOn(t, b.Universal(t))
			cs = append(cs, c)
			ls = append(ls, newLatch(t, c, name, latch.WithPoll(time.Hour)))
		}
		ok, err := ls[0].TrySetCount(ctx, 3)
		require.NoError(t, err)
		require.True(t, ok)
		const n = 30
		done := awaitAll(ctx, ls, n)
		waiting(t, cs, n)
		for i := range 3 {
			require.NoError(t, ls[i].CountDown(ctx))
		}
		for range n {
			require.NoError(t, <-done)
		}
	})
}

// Delete releases the waiters ("1", then no count), with polls far off.
func TestDeleteReleasesWaiters(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		name := redistest.Name(t)
		c1, c2 := clientOn(t, b.Universal(t)), clientOn(t, b.Universal(t))
		l1, l2 := newLatch(t, c1, name, latch.WithPoll(time.Hour)), newLatch(t, c2, name, latch.WithPoll(time.Hour))
		_, err := l1.TrySetCount(ctx, 5)
		require.NoError(t, err)
		done := awaitAll(ctx, []*latch.Latch{l1, l2}, 6)
		waiting(t, []*rlock.Client{c1, c2}, 6)
		ok, err := l2.Delete(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		for range 6 {
			require.NoError(t, <-done)
		}
	})
}

// A count that reaches zero without its "0" message (deleted behind the
// latch's back) releases the waiters by their poll.
func TestLostZeroBoundedByPoll(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		rdb := b.Universal(t)
		c := clientOn(t, rdb)
		l := newLatch(t, c, redistest.Name(t), latch.WithPoll(20*time.Millisecond))
		_, err := l.TrySetCount(ctx, 1)
		require.NoError(t, err)
		done := awaitAll(ctx, []*latch.Latch{l}, 3)
		waiting(t, []*rlock.Client{c}, 3)
		require.NoError(t, rdb.Del(ctx, l.Name()).Err()) // no message
		for range 3 {
			require.NoError(t, <-done)
		}
	})
}

func TestAwaitCancelled(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := clientOn(t, b.Universal(t))
		l := newLatch(t, c, redistest.Name(t))
		_, err := l.TrySetCount(context.Background(), 1)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := awaitAll(ctx, []*latch.Latch{l}, 1)
		waiting(t, []*rlock.Client{c}, 1)
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	})
}

// A CountDown whose reply is lost is re-sent by go-redis and still counts
// once: the operation log recognises the copy.
func TestCountDownResentCountsOnce(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		direct := b.NewClient(t)
		proxy, via := b.NewProxiedClient(t)
		for _, s := range lua.Latch() {
			require.NoError(t, s.Load(ctx, direct).Err())
		}
		l := newLatch(t, clientOn(t, via), redistest.Name(t))
		_, err := l.TrySetCount(ctx, 3)
		require.NoError(t, err)
		proxy.DropNextReply("evalsha")
		require.NoError(t, l.CountDown(ctx))
		require.Equal(t, 1, proxy.Dropped(), "the reply was dropped and the call re-sent")
		require.Equal(t, "2", direct.Get(ctx, l.Name()).Val(), "counted once")
	})
}
