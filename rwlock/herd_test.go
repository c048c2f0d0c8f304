package rwlock_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/core"
	"github.com/rlock-go/rlock/internal/lua"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/internal/waiters"
	"github.com/rlock-go/rlock/rwlock"
)

// writeAttempts counts a go-redis client's write-lock script calls
// (attempts) once answered.
type writeAttempts struct{ n atomic.Int64 }

func (h *writeAttempts) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *writeAttempts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if args := cmd.Args(); len(args) > 1 && args[1] == lua.RWWriteLock.Hash() {
			h.n.Add(1)
		}
		return err
	}
}
func (h *writeAttempts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// Issue 30, the retry herd of the write side: the last write release
// published "1", which woke every waiter of every client, so each grant
// to one of n waiting writers cost about n attempts (785 attempts for 40
// grants here before the fix, about 20 per grant). With designations a
// grant costs about one attempt (the designated client's writer), however
// many clients and writers wait (about 120 in all here). Every writer
// tries once before waiting and once more when its subscription is
// confirmed: those attempts, at most two per writer, are allowed for on
// top, and two per grant for the granted attempt, such retries that land
// after the release and a second designee whose first did not act in
// time.
func TestWriteReleaseWakesOneWriterNotTheHerd(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const clients, perClient = 10, 4
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		name := redistest.Name(t)
		opts := []rwlock.Option{rwlock.WithWriterWait(time.Minute)}
		holder := newRW(t, newClient(t, b), name, opts...)
		require.NoError(t, holder.WriteLock().Lock(ctx))

		hook := &writeAttempts{}
		var wg sync.WaitGroup
		var failed atomic.Int64
		for i := range clients {
			rdb := b.NewClient(t)
			rdb.AddHook(hook)
			c := clientOn(t, rdb)
			for range perClient {
				l := newRW(t, c, name, opts...)
				wg.Go(func() {
					if err := l.WriteLock().Lock(ctx); err != nil {
						failed.Add(1)
						return
					}
					if err := l.WriteLock().Unlock(context.Background()); err != nil {
						failed.Add(1)
					}
				})
			}
			require.Eventually(t, func() bool { return c.Waiters().Waiters == perClient }, 10*time.Second, time.Millisecond, "client %d", i)
		}
		before := hook.n.Load()
		require.NoError(t, holder.WriteLock().Unlock(ctx))
		wg.Wait()
		require.Zero(t, failed.Load())
		grants := int64(clients * perClient)
		setup := 2 * grants
		attempts := hook.n.Load()
		t.Logf("%d attempts for %d grants (%d clients), %d of them before the release", attempts, grants, clients, before)
		require.LessOrEqual(t, attempts, setup+2*grants, "attempts beyond two per grant and two per writer's setup")
	})
}

// Redisson's waiters on the read-write lock's channel read each message as
// a Java long and act on 0 (one waiter) and 1 (every waiter) only. A write
// release that designates rlock clients must still end with "1", and its
// other messages must be numbers other than 0 and 1 (ignored there), so a
// Redisson waiter wakes on every write release as before. A plain
// subscriber stands for a Redisson client here.
func TestDesignatingWriteReleaseStillWakesRedissonWaiters(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		name := redistest.Name(t)
		opts := []rwlock.Option{rwlock.WithWriterWait(time.Minute)}
		holder := newRW(t, newClient(t, b), name, opts...)
		require.NoError(t, holder.WriteLock().Lock(ctx))

		ps := b.NewClient(t).Subscribe(ctx, base.RWChannel(name))
		defer func() { _ = ps.Close() }()
		_, err := ps.Receive(ctx) // the subscription's confirmation
		require.NoError(t, err)

		c := newClient(t, b)
		w := newRW(t, c, name, opts...)
		done := make(chan error, 1)
		go func() { done <- w.WriteLock().Lock(ctx) }()
		rdb := b.Universal(t)
		require.Eventually(t, func() bool { // the waiting writer's client is registered
			n, err := rdb.ZCard(ctx, base.RWWaiters(name)).Result()
			return err == nil && n == 1 && c.Waiters().Waiters == 1
		}, 10*time.Second, time.Millisecond)
		require.NoError(t, holder.WriteLock().Unlock(ctx))
		require.NoError(t, <-done)

		var msgs []string
		for {
			m, err := ps.ReceiveMessage(ctx)
			require.NoError(t, err)
			msgs = append(msgs, m.Payload)
			if m.Payload == base.ReadUnlockMessage {
				break
			}
			require.Len(t, msgs, 1, "more than one designation before the release's message: %q", msgs)
			n, err := strconv.ParseInt(m.Payload, 10, 64)
			require.NoError(t, err, "a designation Redisson cannot read as a long: %q", m.Payload)
			require.True(t, n != 0 && n != 1, "a designation Redisson would act on: %q", m.Payload)
		}
		require.Len(t, msgs, 2, "the release designated nobody: %q", msgs)
		require.NoError(t, w.WriteLock().Unlock(ctx))
	})
}

// A client that closes while its writer waits leaves the writers'
// registry, so that no release designates it (its designation would be
// lost until the others' fallback looked at the lock).
func TestClosedClientLeavesTheWritersRegistry(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		name := redistest.Name(t)
		opts := []rwlock.Option{rwlock.WithWriterWait(time.Minute)}
		holder := newRW(t, newClient(t, b), name, opts...)
		require.NoError(t, holder.WriteLock().Lock(ctx))
		rdb := b.Universal(t)
		registered := func(n int64) func() bool {
			return func() bool {
				got, err := rdb.ZCard(ctx, base.RWWaiters(name)).Result()
				return err == nil && got == n
			}
		}

		closing, staying := newClient(t, b), newClient(t, b)
		cdone, sdone := make(chan error, 1), make(chan error, 1)
		go func() { cdone <- newRW(t, closing, name, opts...).WriteLock().Lock(ctx) }()
		require.Eventually(t, registered(1), 10*time.Second, time.Millisecond)
		sw := newRW(t, staying, name, opts...)
		go func() { sdone <- sw.WriteLock().Lock(ctx) }()
		require.Eventually(t, registered(2), 10*time.Second, time.Millisecond)

		require.NoError(t, closing.Close())
		require.ErrorIs(t, <-cdone, rlock.ErrClosed)
		require.True(t, registered(1)(), "the closed client is still registered")
		require.NoError(t, holder.WriteLock().Unlock(ctx))
		require.NoError(t, <-sdone)
		require.NoError(t, sw.WriteLock().Unlock(ctx))
	})
}

// A designated writer whose woken attempt fails (its ctx ends as it wakes)
// passes the designation on (rw_pass_on.lua): the next registered client
// is designated first and its writer takes the lock at once, rather than
// after the other clients' fallback (300-600 ms) or the second designee's
// grace (one minute here). Three clients wait, a, b and c; the registry
// is set so that a release designates them in that order (registrations
// that end later than any the clients make themselves); a's writer fails,
// b's must get the lock (c, designated second with b, waits out its
// grace).
func TestFailedDesignatedWriterPassesTheDesignationOn(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		defer core.SetSecondGrace(time.Minute)()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		name := redistest.Name(t)
		opts := []rwlock.Option{rwlock.WithWriterWait(time.Minute), rwlock.WithLease(time.Hour)}
		holder := newRW(t, newClient(t, b), name, opts...)
		require.NoError(t, holder.WriteLock().Lock(ctx))

		ids := []string{t.Name() + "-a", t.Name() + "-b", t.Name() + "-c"}
		rdb := b.Universal(t)
		var ws []*rwlock.RWLock
		var dones []chan error
		var cancels []context.CancelFunc
		var ctxs []context.Context
		for i, id := range ids {
			crdb := b.NewClient(t)
			hook := &writeAttempts{}
			crdb.AddHook(hook)
			c := clientOn(t, crdb, rlock.WithClientID(id))
			w := newRW(t, c, name, opts...)
			wctx, wcancel := context.WithCancel(ctx)
			defer wcancel()
			done := make(chan error, 1)
			go func() { done <- w.WriteLock().Lock(wctx) }()
			// Registered, waiting, and done with the attempt its
			// subscription's confirmation starts (the first is refused
			// before it joins), which could otherwise find the lock free.
			require.Eventually(t, func() bool {
				n, err := rdb.ZCard(ctx, base.RWWaiters(name)).Result()
				return err == nil && n == int64(i+1) && c.Waiters().Waiters == 1 && hook.n.Load() == 2
			}, 10*time.Second, time.Millisecond)
			ws, dones, cancels, ctxs = append(ws, w), append(dones, done), append(cancels, wcancel), append(ctxs, wctx)
		}

		far := time.Now().Add(2 * time.Hour).UnixMilli()
		for i, id := range ids {
			n, err := rdb.ZAddXX(ctx, base.RWWaiters(name), redis.Z{Score: float64(far + int64(i)*60_000), Member: waiters.Tag(id)}).Result()
			require.NoError(t, err)
			require.Zero(t, n) // XX: updated, not added
		}
		defer core.FailNextWokenAttempt(ctxs[0], cancels[0])()
		require.NoError(t, holder.WriteLock().Unlock(ctx))
		require.ErrorIs(t, <-dones[0], context.Canceled)
		select {
		case err := <-dones[1]:
			require.NoError(t, err, "the next designee")
		case err := <-dones[2]:
			t.Fatalf("the third client got the lock (err %v): the designation was not passed on to the second", err)
		}
		require.NoError(t, ws[1].WriteLock().Unlock(ctx))
		require.NoError(t, <-dones[2])
		require.NoError(t, ws[2].WriteLock().Unlock(ctx))
	})
}

// Regression: a blocking writer that finds no channel attempts before it
// joins, and its refused attempt registers its client with the lock. A
// client closed between that attempt and the join took itself off the
// registries of the channels its hub had, which did not include this one
// yet, and the call returned ErrClosed without taking it off either: the
// closed client stayed registered until its registration lapsed, and
// releases designated it meanwhile. The call now unregisters its client
// itself when it finds the client closed after a refused attempt. Here
// the client closes exactly in that window.
func TestClientClosedBetweenRefusedAttemptAndJoinLeavesTheWritersRegistry(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		name := redistest.Name(t)
		opts := []rwlock.Option{rwlock.WithWriterWait(time.Minute)}
		holder := newRW(t, newClient(t, b), name, opts...)
		require.NoError(t, holder.WriteLock().Lock(ctx))
		rdb := b.Universal(t)
		closing := newClient(t, b)
		cctx, ccancel := context.WithCancel(ctx)
		defer ccancel()
		var registeredBeforeClose int64
		defer core.BetweenAttemptAndJoin(cctx, func() {
			registeredBeforeClose = rdb.ZCard(ctx, base.RWWaiters(name)).Val()
			_ = closing.Close()
		})()
		require.ErrorIs(t, newRW(t, closing, name, opts...).WriteLock().Lock(cctx), rlock.ErrClosed)
		require.Equal(t, int64(1), registeredBeforeClose, "the refused attempt registered the client")
		n, err := rdb.ZCard(ctx, base.RWWaiters(name)).Result()
		require.NoError(t, err)
		require.Zero(t, n, "the closed client is still registered")
		require.NoError(t, holder.WriteLock().Unlock(ctx))
	})
}
