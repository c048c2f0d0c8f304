package reentrant_test

import (
	"context"
	"github.com/rlock-go/rlock/internal/base"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/reentrant"
)

// clusterNames returns lock names whose slots fall at the start, middle
// and end of every slot range of every master, each also wrapped in a user
// hash tag ("{name}:lock", the form MultiLock members that must share a
// slot use). It reports the master of each name.
func clusterNames(t *testing.T, c *redistest.Cluster) map[string]*redistest.Server {
	t.Helper()
	names := make(map[string]*redistest.Server)
	stem := redistest.Name(t)
	for _, m := range c.Masters(t) {
		for _, r := range c.SlotRanges(t, m) {
			for _, slot := range []int{r[0], (r[0] + r[1]) / 2, r[1]} {
				n := redistest.KeyInSlot(stem, slot)
				require.Equal(t, slot, base.Slot(n))
				names[n] = m
				names["{"+n+"}:lock"] = m
			}
		}
	}
	return names
}

func TestClusterLockUnlockReentry(t *testing.T) {
	c := redistest.SharedCluster(t)
	ctx := context.Background()
	a := clientOn(t, c.NewClient(t))
	b := clientOn(t, c.NewClient(t))
	for name := range clusterNames(t, c) {
		la, lb := newLock(t, a, name), newLock(t, b, name)
		require.NoError(t, la.TryLock(ctx), name)
		require.ErrorIs(t, lb.TryLock(ctx), rlock.ErrNotObtained, name)
		require.NoError(t, la.Lock(la.Ctx()), name) // re-entry: a ctx from the holding
		n, err := la.HoldCount(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		ttl, err := la.TTL(ctx)
		require.NoError(t, err)
		require.Positive(t, ttl)
		require.NoError(t, la.Unlock(ctx))
		require.NoError(t, la.Unlock(ctx))
		locked, err := la.IsLocked(ctx)
		require.NoError(t, err)
		require.False(t, locked, name)

		require.NoError(t, lb.TryLock(ctx), name)
		ok, err := la.ForceUnlock(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.ErrorIs(t, lb.Unlock(ctx), rlock.ErrNotHeld)
		require.ErrorIs(t, lb.Err(), rlock.ErrLockLost)
	}
}

// A waiter blocked on a lock with a long lease is woken by the release on
// whatever master holds the lock, for every pair of pub/sub modes that
// share a way (Auto listens and publishes both ways): in classic mode one
// pub/sub connection (to one node) hears unlocks published on every
// master; in sharded mode there is one connection per master.
func TestClusterWaiterWokenAcrossNodes(t *testing.T) {
	c := redistest.SharedCluster(t)
	modes := []rlock.PubSubMode{rlock.PubSubAuto, rlock.PubSubSharded, rlock.PubSubClassic}
	conns := map[rlock.PubSubMode]int{rlock.PubSubAuto: 1 + 3, rlock.PubSubSharded: 3, rlock.PubSubClassic: 1}
	for _, hm := range modes {
		for _, wm := range modes {
			if (hm == rlock.PubSubSharded && wm == rlock.PubSubClassic) || (hm == rlock.PubSubClassic && wm == rlock.PubSubSharded) {
				continue // no way in common: woken by the lease only
			}
			t.Run(hm.String()+"-to-"+wm.String(), func(t *testing.T) {
				holder := clientOn(t, c.NewClient(t), rlock.WithPubSubMode(hm))
				waiter := clientOn(t, c.NewClient(t), rlock.WithPubSubMode(wm))
				testWokenAcrossNodes(t, c, holder, waiter)
				require.Equal(t, conns[wm], waiter.Waiters().Connections)
			})
		}
	}
}

func testWokenAcrossNodes(t *testing.T, c *redistest.Cluster, holder, waiter *rlock.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name := range clusterNames(t, c) {
		// The lease bounds the waiter's fallback poll: far beyond ctx.
		h := newLock(t, holder, name, reentrant.WithLease(time.Hour))
		w := newLock(t, waiter, name)
		require.NoError(t, h.Lock(ctx))
		got := make(chan error, 1)
		go func() { got <- w.Lock(ctx) }()
		require.Eventually(t, func() bool { return waiter.Waiters().Waiters == 1 }, 10*time.Second, time.Millisecond)
		require.NoError(t, h.Unlock(ctx))
		require.NoError(t, <-got, "%s: woken by the unlock message", name)
		require.NoError(t, w.Unlock(ctx))
	}
}

func TestClusterWatchdogRenews(t *testing.T) {
	c := redistest.SharedCluster(t)
	ctx := context.Background()
	// Renewed often, with a lease long enough for a loaded machine.
	const lease = 3 * time.Second
	cl := clientOn(t, c.NewClient(t), rlock.WithWatchdogLease(lease), rlock.WithWatchdogInterval(100*time.Millisecond))
	var locks []*reentrant.Lock
	for name := range clusterNames(t, c) {
		l := newLock(t, cl, name)
		require.NoError(t, l.Lock(ctx))
		locks = append(locks, l)
	}
	// Every lock, on every master, is renewed; none is lost.
	from := cl.WatchdogStats()
	require.Eventually(t, func() bool { return cl.WatchdogStats().Rounds >= from.Rounds+3 }, 30*time.Second, time.Millisecond)
	st := cl.WatchdogStats()
	require.Zero(t, st.Lost)
	require.Zero(t, st.Errors)
	require.GreaterOrEqual(t, st.Renewed-from.Renewed, uint64(2*len(locks)))
	for _, l := range locks {
		require.NoError(t, l.Err(), l.Name())
		ttl, err := l.TTL(ctx)
		require.NoError(t, err)
		require.Greater(t, ttl, lease-time.Second, "%s renewed", l.Name())
		require.NoError(t, l.Unlock(ctx))
	}
}

// MultiLock members may live in different slots (on different masters):
// each is a separate lock, held and released on its own.
func TestClusterLocksInDifferentSlotsAreSeparate(t *testing.T) {
	c := redistest.SharedCluster(t)
	ctx := context.Background()
	ms := c.Masters(t)
	stem := redistest.Name(t)
	x := redistest.KeyInSlot(stem, c.SlotRanges(t, ms[0])[0][0])
	y := redistest.KeyInSlot(stem, c.SlotRanges(t, ms[1])[0][0])
	a := clientOn(t, c.NewClient(t))
	b := clientOn(t, c.NewClient(t))
	ax, ay, by := newLock(t, a, x), newLock(t, a, y), newLock(t, b, y)

	require.NoError(t, ax.TryLock(ctx))
	require.NoError(t, by.TryLock(ctx), "another slot, another lock")
	require.ErrorIs(t, ay.TryLock(ctx), rlock.ErrNotObtained)
	require.NoError(t, by.Unlock(ctx))
	require.NoError(t, ay.TryLock(ctx), "one owner holds members on two masters")
	require.NoError(t, ax.Unlock(ctx))
	require.NoError(t, ay.Unlock(ctx))
}

// Every operation works after the server forgot its scripts (SCRIPT FLUSH,
// as on a restarted or promoted server): Script.Run falls back to EVAL.
func TestScriptFlush(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.NewClient(t)
		// Renewed often, with a lease long enough for a loaded machine.
		c := clientOn(t, rdb, rlock.WithWatchdogLease(3*time.Second), rlock.WithWatchdogInterval(100*time.Millisecond))
		flush := func() { require.NoError(t, rdb.ScriptFlush(ctx).Err()) }
		name := redistest.Name(t)
		l, other := newLock(t, c, name), newLock(t, c, name)

		flush()
		require.NoError(t, l.Lock(ctx))
		flush()
		require.NoError(t, l.TryLock(l.Ctx())) // re-entry
		flush()
		require.NoError(t, l.Unlock(ctx))
		// Renewal through a flushed cache, several times over.
		from := c.WatchdogStats()
		for range 3 {
			flush()
			r := c.WatchdogStats().Renewed
			require.Eventually(t, func() bool { return c.WatchdogStats().Renewed > r }, 10*time.Second, time.Millisecond, "%+v", c.WatchdogStats())
		}
		require.Zero(t, c.WatchdogStats().Errors-from.Errors)
		require.NoError(t, l.Err())
		flush()
		require.NoError(t, l.Unlock(ctx))
		require.NoError(t, other.TryLock(ctx))
		flush()
		ok, err := l.ForceUnlock(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		flush()
		require.ErrorIs(t, other.Unlock(ctx), rlock.ErrNotHeld)
	})
}

// A lock held in watchdog mode survives its master's death once the write
// has reached the replica: after the promotion the same owner holds it,
// re-enters through the promoted master's empty script cache and releases
// it; the holding period never reports loss.
func TestClusterLockSurvivesFailover(t *testing.T) {
	c := redistest.StartCluster(t)
	ctx := context.Background()
	cc := c.NewClient(t)
	// The lease outlasts the failover (~5 s) on a loaded machine.
	cl := clientOn(t, cc, shortWatchdog(20*time.Second))
	name := redistest.Name(t)
	slot := base.Slot(name)
	victim := c.MasterFor(t, slot)
	l := newLock(t, cl, name)
	waiter := newLock(t, clientOn(t, c.NewClient(t)), name)
	require.NoError(t, l.Lock(ctx))
	victim.WaitReplicasCaughtUp(t)

	victim.Kill()
	c.WaitFailover(t, victim, slot)
	// The watchdog makes cc reload its slot map on its first failed
	// renewal; the test does not wait for that.
	c.Reroute(t, cc)

	n, err := l.HoldCount(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "same owner after the failover")
	require.ErrorIs(t, waiter.TryLock(ctx), rlock.ErrNotObtained)
	require.NoError(t, l.Lock(l.Ctx()), "re-entry on the promoted master")
	require.NoError(t, l.Unlock(ctx))
	require.NoError(t, l.Unlock(ctx))
	require.NoError(t, l.Err(), "released, never lost")
	require.NoError(t, waiter.TryLock(ctx))
	require.NoError(t, waiter.Unlock(ctx))
}

// TestClusterUnlockAfterFailoverWithoutReroute: after a failover, go-redis
// keeps routing to the dead master (its address refuses connections, which
// never triggers a slot-map reload) until its periodic reload, 60 s later.
// rlock reloads the slot map itself after a connection error and runs the
// script again, so a holder with an explicit lease (no watchdog to trigger
// anything) can still release its lock, within a few tries.
func TestClusterUnlockAfterFailoverWithoutReroute(t *testing.T) {
	c := redistest.StartCluster(t)
	ctx := context.Background()
	cc := c.NewClient(t)
	cl := clientOn(t, cc)
	name := redistest.Name(t)
	slot := base.Slot(name)
	victim := c.MasterFor(t, slot)
	l := newLock(t, cl, name, reentrant.WithLease(time.Minute))
	require.NoError(t, l.Lock(ctx))
	victim.WaitReplicasCaughtUp(t)
	victim.Kill()
	c.WaitFailover(t, victim, slot)

	// A user retries the release for 15 s (each failed try takes ~1-2 s of
	// go-redis dial retries); rlock's own retries usually make the first
	// one succeed.
	deadline := time.Now().Add(15 * time.Second)
	err := l.Unlock(ctx)
	for tries := 1; err != nil && time.Now().Before(deadline); tries++ {
		t.Logf("try %d: %v", tries, err)
		err = l.Unlock(ctx)
	}
	require.NoError(t, err, "unlock within 15 s of the failover")
}

// TestReplicaSyncFollowsMovedSlot is defect 6 of issue 12: with replica
// sync on (the default wherever masters have replicas), after a slot
// migration every TryLock on the moved slot failed with MOVED until the
// ClusterClient happened to reload its slot map, while a client without
// replica sync followed the move. Mid-migration, ASK was returned the same
// way. Both are followed now.
func TestReplicaSyncFollowsMovedSlot(t *testing.T) {
	c := redistest.StartCluster(t) // slots are migrated: a cluster of its own
	ctx := context.Background()
	name := redistest.Name(t)
	slot := base.Slot(name)
	synced := clientOn(t, c.NewClient(t))
	d, on := synced.ReplicaSync()
	require.True(t, on)
	require.Equal(t, time.Second, d)
	other := clientOn(t, c.NewClient(t))
	plain := clientOn(t, c.NewClient(t), rlock.WithoutReplicaSync())
	a := newLock(t, synced, name, reentrant.WithFencing())
	b := newLock(t, other, name, reentrant.WithFencing())
	p := newLock(t, plain, name, reentrant.WithFencing())
	for _, l := range []*reentrant.Lock{a, b, p} { // each client learns the slot map
		require.NoError(t, l.TryLock(ctx))
		require.NoError(t, l.Unlock(ctx))
	}
	from := c.MasterFor(t, slot)
	var to *redistest.Server
	for _, m := range c.Masters(t) {
		if m.Addr() != from.Addr() {
			to = m
		}
	}

	c.MigrateSlot(t, slot, to)
	require.NoError(t, p.TryLock(ctx), "without replica sync")
	require.NoError(t, p.Unlock(ctx))
	require.NoError(t, a.TryLock(ctx), "with replica sync the move is followed too")
	require.ErrorIs(t, b.TryLock(ctx), rlock.ErrNotObtained)

	// Back to the old master, mid-migration, with the lock's keys (hash
	// and token counter) already moved: the new master serves them after
	// an ASK.
	mig := c.StartMigration(t, slot, from)
	require.GreaterOrEqual(t, mig.MoveKeys(t), 2) // and release latches
	require.ErrorIs(t, b.TryLock(ctx), rlock.ErrNotObtained, "excluded, through ASK")
	tok := a.Token()
	require.NoError(t, a.TryLock(a.Ctx()), "a re-entry through ASK")
	require.Equal(t, tok, a.Token())
	n, err := a.HoldCount(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	// A release has more keys than the script can find on either master
	// until the migration ends: it is answered TRYAGAIN, and used to fail
	// after go-redis's redirects (about 100 ms), leaving the lock held and
	// renewed. It keeps trying for a few seconds now.
	released := make(chan error, 1)
	go func() { released <- a.Unlock(ctx) }()
	require.Never(t, func() bool { return len(released) > 0 }, 300*time.Millisecond, 5*time.Millisecond,
		"a release during the migration gave up")
	mig.Finish(t)
	require.NoError(t, <-released)
	require.NoError(t, a.Unlock(ctx))
	require.NoError(t, b.TryLock(ctx))
	require.Greater(t, b.Token(), tok)
	require.NoError(t, b.Unlock(ctx))
	require.NoError(t, a.Err())
}
