package semaphore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/lua"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/semaphore"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(redistest.StopSharedAfter(m))
}

func clientOn(t *testing.T, rdb rlock.Redis, opts ...rlock.ClientOption) *rlock.Client {
	t.Helper()
	c, err := rlock.NewClient(rdb, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func newSem(t *testing.T, c *rlock.Client, name string, opts ...semaphore.Option) *semaphore.Semaphore {
	t.Helper()
	s, err := semaphore.New(c, name, opts...)
	require.NoError(t, err)
	return s
}

func available(t *testing.T, s *semaphore.Semaphore) int64 {
	t.Helper()
	n, err := s.AvailablePermits(context.Background())
	require.NoError(t, err)
	return n
}

func TestCounting(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c := clientOn(t, b.Universal(t))
		name := redistest.Name(t)
		s := newSem(t, c, name)

		require.Zero(t, available(t, s), "no key: 0 permits")
		ok, err := s.TryAcquire(ctx, 1)
		require.NoError(t, err)
		require.False(t, ok, "no key: nothing to take")

		ok, err = s.TrySetPermits(ctx, 3)
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = s.TrySetPermits(ctx, 7)
		require.NoError(t, err)
		require.False(t, ok, "set already")
		require.EqualValues(t, 3, available(t, s))

		ok, err = s.TryAcquire(ctx, 2)
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = s.TryAcquire(ctx, 2)
		require.NoError(t, err)
		require.False(t, ok, "one left")
		require.EqualValues(t, 1, available(t, s))

		require.NoError(t, s.Release(ctx, 2))
		require.EqualValues(t, 3, available(t, s))
		require.NoError(t, s.AddPermits(ctx, -4))
		require.EqualValues(t, -1, available(t, s), "AddPermits may go below zero")
		require.NoError(t, s.AddPermits(ctx, 0))
		require.NoError(t, s.AddPermits(ctx, 5))
		require.EqualValues(t, 4, available(t, s))

		n, err := s.DrainPermits(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 4, n)
		require.Zero(t, available(t, s))
		n, err = s.DrainPermits(ctx)
		require.NoError(t, err)
		require.Zero(t, n)

		// The counter is Redisson's: a decimal string under the name.
		direct := b.Universal(t)
		require.NoError(t, s.Release(ctx, 1))
		v, err := direct.Get(ctx, name).Result()
		require.NoError(t, err)
		require.Equal(t, "1", v)

		// Stored 0 counts as set, as in Redisson since 3.16.3.
		s0 := newSem(t, c, name+":zero")
		require.NoError(t, direct.Set(ctx, name+":zero", "0", 0).Err())
		ok, err = s0.TrySetPermits(ctx, 2)
		require.NoError(t, err)
		require.False(t, ok)
	})
}

func TestBadInput(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c := clientOn(t, b.Universal(t))
		name := redistest.Name(t)
		s := newSem(t, c, name)

		_, err := semaphore.New(nil, name)
		require.ErrorIs(t, err, rlock.ErrInvalidArgument)
		_, err = semaphore.New(c, "")
		require.ErrorIs(t, err, rlock.ErrInvalidArgument)
		_, err = semaphore.New(c, "a{b")
		require.ErrorIs(t, err, rlock.ErrInvalidArgument)
		_, err = semaphore.New(c, name, semaphore.WithPoll(0))
		require.ErrorIs(t, err, rlock.ErrInvalidArgument)
		_, err = semaphore.New(c, name, nil)
		require.NoError(t, err)

		for _, n := range []int{0, -1} {
			require.ErrorIs(t, s.Acquire(ctx, n), rlock.ErrInvalidArgument)
			_, err = s.TryAcquire(ctx, n)
			require.ErrorIs(t, err, rlock.ErrInvalidArgument)
			require.ErrorIs(t, s.Release(ctx, n), rlock.ErrInvalidArgument)
		}
		_, err = s.TrySetPermits(ctx, -1)
		require.ErrorIs(t, err, rlock.ErrInvalidArgument)

		// A key of another type, or a counter that is no integer: a clear
		// error, and nothing changed.
		direct := b.Universal(t)
		for _, setup := range []func(key string) error{
			func(key string) error { return direct.HSet(ctx, key, "f", "1").Err() },
			func(key string) error { return direct.Set(ctx, key, "abc", 0).Err() },
			func(key string) error { return direct.Set(ctx, key, "1.5", 0).Err() },
		} {
			key := name + ":bad"
			require.NoError(t, direct.Del(ctx, key).Err())
			require.NoError(t, setup(key))
			typ, err := direct.Type(ctx, key).Result()
			require.NoError(t, err)
			before := dump(t, direct, key, typ)
			bad := newSem(t, c, key)
			_, err = bad.TryAcquire(ctx, 1)
			require.ErrorIs(t, err, rlock.ErrWrongType)
			require.ErrorIs(t, bad.Acquire(ctx, 1), rlock.ErrWrongType)
			require.ErrorIs(t, bad.Release(ctx, 1), rlock.ErrWrongType)
			require.ErrorIs(t, bad.AddPermits(ctx, 1), rlock.ErrWrongType)
			_, err = bad.TrySetPermits(ctx, 1)
			require.ErrorIs(t, err, rlock.ErrWrongType)
			_, err = bad.DrainPermits(ctx)
			require.ErrorIs(t, err, rlock.ErrWrongType)
			_, err = bad.AvailablePermits(ctx)
			require.ErrorIs(t, err, rlock.ErrWrongType)
			require.Equal(t, before, dump(t, direct, key, typ), "unchanged")
		}
	})
}

func dump(t *testing.T, rdb redis.UniversalClient, key, typ string) string {
	t.Helper()
	if typ == "hash" {
		m, err := rdb.HGetAll(context.Background(), key).Result()
		require.NoError(t, err)
		return m["f"]
	}
	v, err := rdb.Get(context.Background(), key).Result()
	require.NoError(t, err)
	return v
}

// numSub returns how many connections listen on channel.
func numSub(t *testing.T, rdb redis.UniversalClient, channel string) int64 {
	t.Helper()
	m, err := rdb.PubSubNumSub(context.Background(), channel).Result()
	require.NoError(t, err)
	return m[channel]
}

// A blocked Acquire is woken by a release on another client: its poll is
// an hour, so only the message can wake it in time.
func TestAcquireWokenByRelease(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		name := redistest.Name(t)
		waiter := newSem(t, clientOn(t, b.Universal(t)), name, semaphore.WithPoll(time.Hour))
		releaser := newSem(t, clientOn(t, b.Universal(t)), name)
		direct := b.Universal(t)

		done := make(chan error, 1)
		go func() { done <- waiter.Acquire(ctx, 2) }()
		channel := "redisson_sc:{" + name + "}"
		require.Eventually(t, func() bool { return numSub(t, direct, channel) == 1 }, 10*time.Second, time.Millisecond)
		require.NoError(t, releaser.Release(ctx, 1))
		require.NoError(t, releaser.Release(ctx, 1))
		require.NoError(t, <-done)
		require.Zero(t, available(t, releaser))
	})
}

// Several waiters of one client, each woken in turn: a release of k
// permits wakes k of them, and nobody holds more than there are.
func TestManyWaitersWoken(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		name := redistest.Name(t)
		c := clientOn(t, b.Universal(t))
		s := newSem(t, c, name, semaphore.WithPoll(time.Hour))
		releaser := newSem(t, clientOn(t, b.Universal(t)), name)
		const waiters = 5
		var wg sync.WaitGroup
		errs := make(chan error, waiters)
		for range waiters {
			wg.Go(func() { errs <- s.Acquire(ctx, 1) })
		}
		require.Eventually(t, func() bool { return c.Waiters().Waiters == waiters }, 10*time.Second, time.Millisecond)
		require.NoError(t, releaser.Release(ctx, 3))
		require.NoError(t, releaser.Release(ctx, 2))
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.Zero(t, available(t, releaser))
	})
}

// A permit that appears without a message (the message was lost: here the
// counter is written directly) is found by the waiter's poll.
func TestBoundedWaitWithLostMessage(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		name := redistest.Name(t)
		c := clientOn(t, b.Universal(t))
		s := newSem(t, c, name, semaphore.WithPoll(20*time.Millisecond))
		direct := b.Universal(t)
		done := make(chan error, 1)
		go func() { done <- s.Acquire(ctx, 1) }()
		require.Eventually(t, func() bool { return c.Waiters().Waiters == 1 }, 10*time.Second, time.Millisecond)
		require.NoError(t, direct.Set(ctx, name, "1", 0).Err()) // no PUBLISH
		require.NoError(t, <-done)
		require.Zero(t, available(t, s))
	})
}

// A wait whose ctx ends returns ctx's error, takes nothing and leaves the
// hub.
func TestAcquireCtxEnds(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		name := redistest.Name(t)
		c := clientOn(t, b.Universal(t))
		s := newSem(t, c, name)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Acquire(ctx, 1) }()
		require.Eventually(t, func() bool { return c.Waiters().Waiters == 1 }, 10*time.Second, time.Millisecond)
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		require.Zero(t, c.Waiters().Waiters)
		require.ErrorIs(t, s.Acquire(ctx, 1), context.Canceled, "an ended ctx sends nothing")
		require.NoError(t, c.Close())
		require.ErrorIs(t, s.Acquire(context.Background(), 1), rlock.ErrClosed)
	})
}

// cancelAfterAcquire is a go-redis hook that ends a ctx once the acquire
// script has run: the grant arrives after the caller gave up.
type cancelAfterAcquire struct {
	cancel context.CancelFunc
	armed  chan struct{}
}

func (h *cancelAfterAcquire) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *cancelAfterAcquire) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *cancelAfterAcquire) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if len(cmd.Args()) > 1 && cmd.Args()[1] == lua.SemAcquire.Hash() {
			select {
			case <-h.armed:
				h.cancel()
			default:
			}
		}
		return err
	}
}

// A grant that comes back after the caller's ctx ended is given back.
func TestGrantAfterCtxEndGivenBack(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		name := redistest.Name(t)
		rdb := b.NewClient(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		h := &cancelAfterAcquire{cancel: cancel, armed: make(chan struct{})}
		rdb.AddHook(h)
		s := newSem(t, clientOn(t, rdb), name)
		_, err := s.TrySetPermits(ctx, 2)
		require.NoError(t, err)
		close(h.armed)
		ok, err := s.TryAcquire(ctx, 2)
		require.ErrorIs(t, err, context.Canceled)
		require.False(t, ok)
		require.EqualValues(t, 2, available(t, s), "given back")
	})
}

// TestLostReplyChangesStateOnce drops the reply of each write after the
// server ran it; go-redis sends it again on a new connection (MaxRetries 3
// by default), so every script runs twice. The count must move once.
func TestLostReplyChangesStateOnce(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		proxy, rdb := b.NewProxiedClient(t)
		redistest.LoadScripts(t, rdb)
		s := newSem(t, clientOn(t, rdb), name)

		step := func(what string, op func() error, want int64) {
			t.Helper()
			dropped := proxy.Dropped()
			proxy.DropNextReply("evalsha")
			require.NoError(t, op(), what)
			require.Equal(t, dropped+1, proxy.Dropped(), "%s: the reply was dropped", what)
			require.Equal(t, want, available(t, s), what)
		}
		step("set", func() error {
			ok, err := s.TrySetPermits(ctx, 5)
			if err == nil && !ok {
				return errors.New("a re-sent set reported false")
			}
			return err
		}, 5)
		step("acquire", func() error {
			ok, err := s.TryAcquire(ctx, 2)
			if err == nil && !ok {
				return errors.New("a re-sent acquire reported false")
			}
			return err
		}, 3)
		step("blocking acquire", func() error { return s.Acquire(ctx, 1) }, 2)
		step("release", func() error { return s.Release(ctx, 3) }, 5)
		step("add", func() error { return s.AddPermits(ctx, -1) }, 4)
		step("drain", func() error { _, err := s.DrainPermits(ctx); return err }, 0)
	})
}

// When every copy of an acquire loses its reply, the caller gets the
// error and holds nothing: what a copy took is given back, and a copy
// arriving later takes nothing.
func TestLostAcquireGivenBack(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		proxy, rdb := b.NewProxiedClient(t)
		redistest.LoadScripts(t, rdb)
		s := newSem(t, clientOn(t, rdb), name)
		_, err := s.TrySetPermits(ctx, 5)
		require.NoError(t, err)

		proxy.DropReplies("evalsha", 4) // the first send and go-redis' 3 re-sends
		ok, err := s.TryAcquire(ctx, 2)
		require.Error(t, err)
		require.False(t, ok)
		require.Equal(t, 4, proxy.Dropped())
		require.EqualValues(t, 5, available(t, s), "given back")

		// The record marks the attempt given back: a late copy of it
		// (the same operation ID) takes nothing.
		direct := b.NewClient(t)
		ops, err := direct.ZRange(ctx, "{"+name+"}:rlock_ops", 0, -1).Result()
		require.NoError(t, err)
		var id string
		for _, m := range ops {
			if strings.HasSuffix(m, "!") {
				id = strings.TrimSuffix(m, "!")
			}
		}
		require.NotEmpty(t, id, "given-back marker in %v", ops)
		res, err := lua.SemAcquire.Run(ctx, direct, []string{name, "{" + name + "}:rlock_ops"}, 2, id, 60000).Int64Slice()
		require.NoError(t, err)
		require.Equal(t, []int64{0, 0, 1}, res)
		require.EqualValues(t, 5, available(t, s))

		// Every copy of a release lost, then its retry under the same ID:
		// returned once.
		proxy.DropReplies("evalsha", 4)
		require.NoError(t, s.Release(ctx, 1))
		require.EqualValues(t, 6, available(t, s))
	})
}

// The operation record stays bounded: it expires with the replay window.
func TestOpsRecordExpires(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		c := clientOn(t, b.Universal(t), rlock.WithReplayWindow(time.Minute))
		s := newSem(t, c, name)
		require.NoError(t, s.Release(ctx, 1))
		direct := b.Universal(t)
		ttl, err := direct.PTTL(ctx, "{"+name+"}:rlock_ops").Result()
		require.NoError(t, err)
		require.Greater(t, ttl, time.Duration(0))
		require.LessOrEqual(t, ttl, time.Minute)
	})
}

// Names with a hash tag keep Redisson's naming: "redisson_sc:name" and
// "name:rlock_ops".
func TestHashTagNames(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := "{" + redistest.Name(t) + "}:sem"
		c := clientOn(t, b.Universal(t))
		s := newSem(t, c, name)
		require.NoError(t, s.Release(ctx, 1))
		direct := b.Universal(t)
		n, err := direct.Exists(ctx, name, name+":rlock_ops").Result()
		require.NoError(t, err)
		require.EqualValues(t, 2, n)
	})
}

// The operation record keeps at most 10000 IDs however busy the
// semaphore is within the replay window.
func TestOpsRecordCapped(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		s := newSem(t, clientOn(t, b.Universal(t)), name)
		direct := b.Universal(t)
		soon := time.Now().Add(30 * time.Second).UnixMilli() // before the release's own expiry
		members := make([]redis.Z, 10005)
		for i := range members {
			members[i] = redis.Z{Score: float64(soon + int64(i)), Member: "old" + strconv.Itoa(i)}
		}
		ops := "{" + name + "}:rlock_ops"
		require.NoError(t, direct.ZAdd(ctx, ops, members...).Err())
		require.NoError(t, s.Release(ctx, 1))
		n, err := direct.ZCard(ctx, ops).Result()
		require.NoError(t, err)
		require.EqualValues(t, 10000, n)
		require.ErrorIs(t, direct.ZScore(ctx, ops, "old5").Err(), redis.Nil, "the oldest went first")
		require.NoError(t, direct.ZScore(ctx, ops, "old6").Err())
	})
}
