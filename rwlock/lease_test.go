package rwlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/rwlock"
)

// waitUntil blocks until t, a moment computed from a lease (waiting for a
// lease to run out on the server, not synchronisation).
func waitUntil(at time.Time) {
	<-time.After(time.Until(at))
}

// requireProtected checks the invariant for a read handle that says it
// holds: another owner's write TryLock is refused. A write that got in is
// released again so that the failure message is the only effect.
func requireProtected(t *testing.T, r *rwlock.ReadLock, other *rwlock.RWLock, what string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, r.Err(), what)
	until := r.Until()
	err := other.WriteLock().TryLock(ctx)
	if err == nil {
		_ = other.WriteLock().Unlock(ctx)
		t.Fatalf("%s: a writer got in while the reader's holding is open (Err nil, Until %v ahead)", what, time.Until(until))
	}
	require.ErrorIs(t, err, rlock.ErrNotObtained, what)
}

// TestReadReentryLeaseOutlivesOwnKey: a short read lease, a longer read
// re-entry, one Unlock: the holding the client reports (Until = the
// longer lease) stays protected on the server past the short lease.
func TestReadReentryLeaseOutlivesOwnKey(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		reader, writer := newRW(t, newClient(t, b), name), newRW(t, newClient(t, b), name)
		const short, long = 500 * time.Millisecond, 20 * time.Second
		start := time.Now()
		r := reader.ReadLock()
		require.NoError(t, r.LockLease(ctx, short))
		require.NoError(t, r.LockLease(ctx, long))
		require.NoError(t, r.Unlock(ctx))
		waitUntil(start.Add(2 * short))
		require.Greater(t, time.Until(r.Until()), long/2, "the holding reports the longer lease")
		requireProtected(t, r, writer, "past the short lease")
		require.NoError(t, r.Unlock(ctx))
		require.NoError(t, writer.WriteLock().TryLock(ctx), "released")
	})
}

// TestReadReentryWatchdogOutlivesLeasedKey: a read hold with a short
// lease, a watchdog re-entry, one Unlock: the watchdog protects the hold
// left, whose key must not run out before the first renewal.
func TestReadReentryWatchdogOutlivesLeasedKey(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		reader, writer := newRW(t, newClient(t, b), name), newRW(t, newClient(t, b), name)
		const short = 500 * time.Millisecond
		start := time.Now()
		r := reader.ReadLock()
		require.NoError(t, r.LockLease(ctx, short))
		require.NoError(t, r.Lock(ctx))
		require.NoError(t, r.Unlock(ctx))
		waitUntil(start.Add(2 * short))
		select {
		case <-r.Done():
			t.Fatalf("the watchdog's holding ended: %v", r.Err())
		default:
		}
		requireProtected(t, r, writer, "past the short lease, under the watchdog")
		require.NoError(t, r.Unlock(ctx))
	})
}

// TestReadSetLeaseCoversEveryReentry: SetLease on a read holding of
// several re-entries sets the lease of all of them: a shorter one ends
// the holding (the client reports it) and lets a writer in; the server
// never keeps a re-entry alive past it.
func TestReadSetLeaseCoversEveryReentry(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		reader, writer := newRW(t, newClient(t, b), name), newRW(t, newClient(t, b), name)
		r := reader.ReadLock()
		require.NoError(t, r.LockLease(ctx, 20*time.Second))
		require.NoError(t, r.Lock(ctx))
		require.NoError(t, r.LockLease(ctx, 300*time.Millisecond))
		require.NoError(t, r.SetLease(ctx, 400*time.Millisecond))
		require.LessOrEqual(t, time.Until(r.Until()), 400*time.Millisecond)
		requireProtected(t, r, writer, "within the lease set")
		select {
		case <-r.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the lease set never ran out")
		}
		require.ErrorIs(t, r.Err(), rlock.ErrLockLost)
		require.Eventually(t, func() bool { return writer.WriteLock().TryLock(ctx) == nil }, 10*time.Second, 5*time.Millisecond)
	})
}

// TestWriteLeaseNotOutlivedByOwnRead: a write hold with an explicit lease
// and the same owner's read hold under the watchdog: when the write lease
// runs out, the owner keeps reading, and others may read.
func TestWriteLeaseNotOutlivedByOwnRead(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		l, other := newRW(t, newClient(t, b), name), newRW(t, newClient(t, b), name)
		w, r := l.WriteLock(), l.ReadLock()
		require.NoError(t, w.LockLease(ctx, 500*time.Millisecond))
		require.NoError(t, r.Lock(w.Ctx())) // the writer reads: a ctx from its write holding
		require.ErrorIs(t, other.ReadLock().TryLock(ctx), rlock.ErrNotObtained, "the writer writes")
		select {
		case <-w.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the write lease never ran out")
		}
		require.ErrorIs(t, w.Err(), rlock.ErrLockLost)
		// The server's end of the lease is at most a round trip later
		// than the client's (the grant ran after it was sent).
		require.Eventually(t, func() bool { return other.ReadLock().TryLock(ctx) == nil }, time.Second, 5*time.Millisecond,
			"the write hold ended: others read")
		require.NoError(t, r.Err(), "the owner keeps its read")
		require.True(t, held(t, r))
		s := state(t, other)
		require.Equal(t, "read", s.Mode)
		require.False(t, s.Writing)
		require.Len(t, s.Readers, 2)
		_, writing, err := other.Writer(ctx)
		require.NoError(t, err)
		require.False(t, writing)
		require.ErrorIs(t, w.Unlock(ctx), rlock.ErrNotHeld)
		require.ErrorIs(t, other.WriteLock().TryLock(other.ReadLock().Ctx()), rlock.ErrUpgrade)
		require.NoError(t, r.Unlock(ctx))
		require.NoError(t, other.ReadLock().Unlock(ctx))
		locked, err := l.IsLocked(ctx)
		require.NoError(t, err)
		require.False(t, locked)
	})
}

// TestWriteLeaseRunsOutBeforeOwnReadRenewal: the write hold's lease runs
// out while its owner reads; the hash lives on for the read, yet a writer
// of another owner is refused only because of the read, and gets in once
// the read is released.
func TestWriteLeaseRunsOutBeforeOwnReadRenewal(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		l, other := newRW(t, newClient(t, b), name), newRW(t, newClient(t, b), name)
		w, r := l.WriteLock(), l.ReadLock()
		require.NoError(t, w.LockLease(ctx, 400*time.Millisecond))
		require.NoError(t, w.TryLockLease(w.Ctx(), 500*time.Millisecond), "re-entry")
		require.NoError(t, r.LockLease(w.Ctx(), time.Minute))
		require.NoError(t, w.Unlock(ctx), "one write hold of two")
		<-w.Done()
		require.ErrorIs(t, w.Err(), rlock.ErrLockLost)
		require.Eventually(t, func() bool { return other.ReadLock().TryLock(ctx) == nil }, 10*time.Second, 5*time.Millisecond)
		require.NoError(t, r.Unlock(ctx))
		require.NoError(t, other.ReadLock().Unlock(ctx))
		require.NoError(t, other.WriteLock().TryLock(ctx))
	})
}

// requireTTLFits checks that the lock's TTL is the longest of its read
// holds' keys (Redisson's writer looks only at the lock's TTL in read
// mode), within slack for the time between the two reads.
func requireTTLFits(t *testing.T, rdb redis.UniversalClient, name string, fields []string, what string) {
	t.Helper()
	ctx := context.Background()
	var longest time.Duration
	for _, f := range fields {
		for n := int64(1); n <= 5; n++ {
			p, err := rdb.PTTL(ctx, base.RWTimeoutKey(name, f, n)).Result()
			require.NoError(t, err)
			longest = max(longest, p)
		}
	}
	p, err := rdb.PTTL(ctx, name).Result()
	require.NoError(t, err)
	require.GreaterOrEqual(t, p, longest-50*time.Millisecond, "%s: the lock outlives a read hold", what)
	require.LessOrEqual(t, p, longest+50*time.Millisecond, "%s: the lock's TTL %v outlives every read hold (longest %v)", what, p, longest)
}

// TestReadHoldEndFitsLockTTL: every path that shortens or ends a read
// hold leaves the lock's TTL at the longest hold left.
func TestReadHoldEndFitsLockTTL(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		rdb := b.Universal(t)
		c := newClient(t, b)
		a, z := newRW(t, c, name), newRW(t, c, name)
		ra, rz := a.ReadLock(), z.ReadLock()
		fa, err := ra.Owner(ctx)
		require.NoError(t, err)
		fz, err := rz.Owner(ctx)
		require.NoError(t, err)
		fields := []string{fa, fz}

		require.NoError(t, ra.Lock(ctx))
		require.NoError(t, ra.LockLease(ctx, time.Minute))
		require.NoError(t, rz.LockLease(ctx, 10*time.Second))
		requireTTLFits(t, rdb, name, fields, "grants")
		require.NoError(t, ra.SetLease(ctx, 5*time.Second))
		requireTTLFits(t, rdb, name, fields, "SetLease shorter")
		require.NoError(t, rz.LockLease(ctx, 2*time.Second))
		require.NoError(t, rz.SetLease(ctx, 3*time.Second))
		requireTTLFits(t, rdb, name, fields, "SetLease on re-entries")
		require.NoError(t, ra.Unlock(ctx))
		requireTTLFits(t, rdb, name, fields, "a non-last release")
		require.NoError(t, ra.Unlock(ctx))
		requireTTLFits(t, rdb, name, fields, "a last release")
		require.NoError(t, rz.Unlock(ctx))
		requireTTLFits(t, rdb, name, fields, "a non-last release, the only reader")
		require.NoError(t, rz.SetLease(ctx, 500*time.Millisecond))
		requireTTLFits(t, rdb, name, fields, "the only reader shortens")
	})
}
