package semaphore_test

import (
	"context"
	"encoding/hex"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/semaphore"
)

func newExp(t *testing.T, c *rlock.Client, name string, opts ...semaphore.Option) *semaphore.Expirable {
	t.Helper()
	e, err := semaphore.NewExpirable(c, name, opts...)
	require.NoError(t, err)
	return e
}

func counts(t *testing.T, e *semaphore.Expirable) (avail, held int64) {
	t.Helper()
	a, err := e.AvailablePermits(context.Background())
	require.NoError(t, err)
	h, err := e.AcquiredPermits(context.Background())
	require.NoError(t, err)
	return a, h
}

func TestExpirable(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		c := clientOn(t, b.Universal(t))
		e := newExp(t, c, name)
		direct := b.Universal(t)

		ok, err := e.TrySetPermits(ctx, 2)
		require.NoError(t, err)
		require.True(t, ok)
		p1, err := e.TryAcquire(ctx, semaphore.WithLease(time.Hour))
		require.NoError(t, err)
		require.NotNil(t, p1)
		require.Len(t, p1.ID(), 32)
		raw, _ := hex.DecodeString(p1.ID())
		score, err := direct.ZScore(ctx, "{"+name+"}:timeout", string(raw)).Result()
		require.NoError(t, err, "the member is the raw 16 bytes")
		require.EqualValues(t, p1.Until().UnixMilli(), int64(score))

		p2, err := e.Acquire(ctx, semaphore.WithLease(time.Hour))
		require.NoError(t, err)
		none, err := e.TryAcquire(ctx)
		require.NoError(t, err)
		require.Nil(t, none)
		a, h := counts(t, e)
		require.EqualValues(t, 0, a)
		require.EqualValues(t, 2, h)

		require.NoError(t, p1.Release(ctx))
		require.NoError(t, p1.Err())
		<-p1.Done()
		require.ErrorIs(t, p1.Release(ctx), rlock.ErrNotHeld)
		require.NoError(t, e.Release(ctx, p2.ID()), "by ID")
		require.ErrorIs(t, e.Release(ctx, p2.ID()), rlock.ErrNotHeld)
		a, h = counts(t, e)
		require.EqualValues(t, 2, a)
		require.EqualValues(t, 0, h)

		require.ErrorIs(t, e.Release(ctx, "xyz"), rlock.ErrInvalidArgument)
		require.ErrorIs(t, e.Release(ctx, "ABCDEF0123456789ABCDEF0123456789"), rlock.ErrInvalidArgument)
		_, err = e.TryAcquire(ctx, semaphore.WithLease(0))
		require.ErrorIs(t, err, rlock.ErrInvalidArgument)

		// UpdateLease and SetLease move the expiry on.
		p3, err := e.TryAcquire(ctx, semaphore.WithLease(time.Hour))
		require.NoError(t, err)
		ok, err = e.UpdateLease(ctx, p3.ID(), 2*time.Hour)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, p3.SetLease(ctx, 3*time.Hour))
		require.WithinDuration(t, time.Now().Add(3*time.Hour), p3.Until(), time.Minute)
		require.NoError(t, p3.Release(ctx))

		// A Redisson permit without a lease (the sentinel score) counts as
		// held and is never reclaimed.
		require.NoError(t, direct.ZAdd(ctx, "{"+name+"}:timeout", redisZ(semaphore.NoLeaseScore, "0123456789abcdef")).Err())
		require.NoError(t, direct.Decr(ctx, name).Err())
		a, h = counts(t, e)
		require.EqualValues(t, 1, a)
		require.EqualValues(t, 1, h)
	})
}

// A permit whose lease passes is reported lost and returned to the pool;
// a waiter wakes at the nearest expiry without any message.
func TestExpirableLeasePasses(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		name := redistest.Name(t)
		c := clientOn(t, b.Universal(t))
		e := newExp(t, c, name, semaphore.WithPoll(time.Hour))
		_, err := e.TrySetPermits(ctx, 1)
		require.NoError(t, err)
		p, err := e.Acquire(ctx, semaphore.WithLease(50*time.Millisecond))
		require.NoError(t, err)
		q, err := e.Acquire(ctx, semaphore.WithLease(time.Hour)) // wakes at p's expiry
		require.NoError(t, err)
		<-p.Done()
		require.ErrorIs(t, p.Err(), rlock.ErrLockLost)
		require.ErrorIs(t, context.Cause(p.Ctx()), rlock.ErrLockLost)
		require.ErrorIs(t, p.Release(ctx), rlock.ErrNotHeld)
		require.NoError(t, q.Release(ctx))
	})
}

// A permit without a lease is renewed by the watchdog's lease, and reports
// its loss when a renewal finds it gone.
func TestExpirableWatchdog(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		c := clientOn(t, b.Universal(t), rlock.WithWatchdogLease(300*time.Millisecond))
		e := newExp(t, c, name)
		_, err := e.TrySetPermits(ctx, 1)
		require.NoError(t, err)
		p, err := e.Acquire(ctx)
		require.NoError(t, err)
		first := p.Until()
		require.Eventually(t, func() bool { return p.Until().After(first.Add(250 * time.Millisecond)) }, 10*time.Second, time.Millisecond, "renewed past its first lease")
		require.NoError(t, p.Err())
		_, h := counts(t, e)
		require.EqualValues(t, 1, h, "still held after its first lease")

		// Taken away behind its back: the next renewal reports the loss.
		raw, _ := hex.DecodeString(p.ID())
		require.NoError(t, b.Universal(t).ZRem(ctx, "{"+name+"}:timeout", string(raw)).Err())
		require.NoError(t, b.Universal(t).Incr(ctx, name).Err())
		select {
		case <-p.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("loss not reported")
		}
		require.ErrorIs(t, p.Err(), rlock.ErrLockLost)

		// Closing the client ends renewal and reports the permit lost.
		q, err := e.TryAcquire(ctx)
		require.NoError(t, err)
		require.NotNil(t, q)
		require.NoError(t, c.Close())
		<-q.Done()
		require.ErrorIs(t, q.Err(), rlock.ErrLockLost)
	})
}

// Lost replies: a re-sent acquire takes one permit, a re-sent release
// returns it once; an acquire whose every reply is lost is given back.
func TestExpirableLostReply(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		proxy, rdb := b.NewProxiedClient(t)
		redistest.LoadScripts(t, rdb)
		e := newExp(t, clientOn(t, rdb), name)
		_, err := e.TrySetPermits(ctx, 3)
		require.NoError(t, err)

		proxy.DropNextReply("evalsha")
		p, err := e.TryAcquire(ctx, semaphore.WithLease(time.Hour))
		require.NoError(t, err)
		require.NotNil(t, p)
		require.Equal(t, 1, proxy.Dropped())
		a, h := counts(t, e)
		require.EqualValues(t, 2, a)
		require.EqualValues(t, 1, h)

		proxy.DropNextReply("evalsha")
		require.NoError(t, p.Release(ctx))
		a, h = counts(t, e)
		require.EqualValues(t, 3, a)
		require.EqualValues(t, 0, h)

		proxy.DropReplies("evalsha", 4)
		p, err = e.TryAcquire(ctx, semaphore.WithLease(time.Hour))
		require.Error(t, err)
		require.Nil(t, p)
		a, h = counts(t, e)
		require.EqualValues(t, 3, a, "given back")
		require.EqualValues(t, 0, h)
	})
}

func redisZ(score float64, member string) redis.Z { return redis.Z{Score: score, Member: member} }

// A waiter of the expirable semaphore is woken by a release on another
// client (its poll is an hour).
func TestExpirableWokenByRelease(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		name := redistest.Name(t)
		c := clientOn(t, b.Universal(t))
		e := newExp(t, c, name, semaphore.WithPoll(time.Hour))
		other := newExp(t, clientOn(t, b.Universal(t)), name)
		_, err := other.TrySetPermits(ctx, 1)
		require.NoError(t, err)
		p, err := other.Acquire(ctx, semaphore.WithLease(time.Hour))
		require.NoError(t, err)
		got := make(chan *semaphore.Permit, 1)
		go func() {
			q, err := e.Acquire(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- q
		}()
		require.Eventually(t, func() bool { return c.Waiters().Waiters == 1 }, 10*time.Second, time.Millisecond)
		require.NoError(t, p.Release(ctx))
		q := <-got
		require.NotNil(t, q)
		require.NoError(t, q.Release(ctx))
	})
}

func TestExpirableBadInput(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		c := clientOn(t, b.Universal(t))
		_, err := semaphore.NewExpirable(nil, name)
		require.ErrorIs(t, err, rlock.ErrInvalidArgument)
		_, err = semaphore.NewExpirable(c, "")
		require.ErrorIs(t, err, rlock.ErrInvalidArgument)
		e := newExp(t, c, name)
		_, err = e.UpdateLease(ctx, "0123456789abcdef0123456789abcdef", 0)
		require.ErrorIs(t, err, rlock.ErrInvalidArgument)
		ok, err := e.UpdateLease(ctx, "0123456789abcdef0123456789abcdef", time.Second)
		require.NoError(t, err)
		require.False(t, ok, "unknown permit")
		ok, err = e.TryRelease(ctx, "0123456789abcdef0123456789abcdef")
		require.NoError(t, err)
		require.False(t, ok)

		require.NoError(t, b.Universal(t).HSet(ctx, name, "f", "1").Err())
		_, err = e.TryAcquire(ctx)
		require.ErrorIs(t, err, rlock.ErrWrongType)
		_, err = e.AvailablePermits(ctx)
		require.ErrorIs(t, err, rlock.ErrWrongType)
	})
}

// LeaseTime reports a held permit's remaining lease (-1 for Redisson's
// no-lease score), ErrNotHeld for one not held; DrainPermits reclaims
// expired permits and takes every available one, once under re-sends.
func TestExpirableLeaseTimeAndDrain(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		c := clientOn(t, b.Universal(t))
		e := newExp(t, c, name)
		direct := b.Universal(t)

		_, err := e.TrySetPermits(ctx, 4)
		require.NoError(t, err)
		p, err := e.Acquire(ctx, semaphore.WithLease(time.Minute))
		require.NoError(t, err)
		d, err := e.LeaseTime(ctx, p.ID())
		require.NoError(t, err)
		require.InDelta(t, time.Minute.Milliseconds(), d.Milliseconds(), 5000)

		watched, err := e.Acquire(ctx)
		require.NoError(t, err)
		d, err = e.LeaseTime(ctx, watched.ID())
		require.NoError(t, err)
		require.Positive(t, d, "a watchdog permit has the watchdog's lease")
		require.LessOrEqual(t, d, 30*time.Second)

		raw := []byte("0123456789abcdef") // Redisson's permit without a lease
		require.NoError(t, direct.ZAdd(ctx, "{"+name+"}:timeout", redis.Z{Score: semaphore.NoLeaseScore, Member: string(raw)}).Err())
		require.NoError(t, direct.DecrBy(ctx, name, 1).Err())
		d, err = e.LeaseTime(ctx, hex.EncodeToString(raw))
		require.NoError(t, err)
		require.Equal(t, time.Duration(-1), d)

		_, err = e.LeaseTime(ctx, "00000000000000000000000000000000")
		require.ErrorIs(t, err, rlock.ErrNotHeld)
		_, err = e.LeaseTime(ctx, "nothex")
		require.ErrorIs(t, err, rlock.ErrInvalidArgument)

		// One permit left available, and one held whose lease has passed.
		short, err := e.Acquire(ctx, semaphore.WithLease(time.Millisecond))
		require.NoError(t, err)
		<-short.Done()
		n, err := e.DrainPermits(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "the expired permit, reclaimed first")
		a, h := counts(t, e)
		require.EqualValues(t, 0, a)
		require.EqualValues(t, 3, h)
		n, err = e.DrainPermits(ctx)
		require.NoError(t, err)
		require.Zero(t, n)
	})
}

// AcquireN and TryAcquireN take several permits at once, all or none,
// each with its own ID; a blocked AcquireN is granted once enough are
// released; bad counts are refused.
func TestExpirableAcquireN(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		c := clientOn(t, b.Universal(t))
		e := newExp(t, c, name, semaphore.WithPoll(100*time.Millisecond))

		_, err := e.TrySetPermits(ctx, 3)
		require.NoError(t, err)
		ps, err := e.TryAcquireN(ctx, 2, semaphore.WithLease(time.Minute))
		require.NoError(t, err)
		require.Len(t, ps, 2)
		require.NotEqual(t, ps[0].ID(), ps[1].ID())
		a, h := counts(t, e)
		require.Equal(t, [2]int64{1, 2}, [2]int64{a, h})

		none, err := e.TryAcquireN(ctx, 2)
		require.NoError(t, err)
		require.Nil(t, none, "all or none: one is not two")
		a, h = counts(t, e)
		require.Equal(t, [2]int64{1, 2}, [2]int64{a, h}, "nothing taken")

		got := make(chan []*semaphore.Permit, 1)
		go func() {
			ps, err := e.AcquireN(ctx, 3)
			assert.NoError(t, err)
			got <- ps
		}()
		require.NoError(t, ps[0].Release(ctx))
		require.NoError(t, e.Release(ctx, ps[1].ID()))
		three := <-got
		require.Len(t, three, 3)
		a, h = counts(t, e)
		require.Equal(t, [2]int64{0, 3}, [2]int64{a, h})
		for _, p := range three {
			require.NoError(t, p.Release(ctx))
		}

		for _, n := range []int{0, -1, semaphore.MaxPermitsPerCall + 1} {
			_, err := e.TryAcquireN(ctx, n)
			require.ErrorIs(t, err, rlock.ErrInvalidArgument, n)
			_, err = e.AcquireN(ctx, n)
			require.ErrorIs(t, err, rlock.ErrInvalidArgument, n)
		}
	})
}

// An AcquireN whose reply is lost is re-sent by go-redis and takes its
// permits once.
func TestExpirableAcquireNResentTakesOnce(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		direct := b.NewClient(t)
		redistest.LoadScripts(t, direct)
		proxy, via := b.NewProxiedClient(t)
		e := newExp(t, clientOn(t, via), redistest.Name(t))
		_, err := e.TrySetPermits(ctx, 5)
		require.NoError(t, err)
		proxy.DropNextReply("evalsha")
		ps, err := e.AcquireN(ctx, 3)
		require.NoError(t, err)
		require.Len(t, ps, 3)
		require.Equal(t, 1, proxy.Dropped())
		a, h := counts(t, e)
		require.Equal(t, [2]int64{2, 3}, [2]int64{a, h}, "taken once")
	})
}
