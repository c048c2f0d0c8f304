package reentrant_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/core"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/internal/renewal"
)

// busyNode holds every watchdog round that carries key before it is sent,
// one at a time, until the test lets it go: the node is busy (as a slow
// server keeps it) and the ticks that come due meanwhile park its leases.
type busyNode struct {
	key  string
	sent chan []string // the keys of each round held
	next chan struct{} // lets one held round go
	done chan struct{} // closed at the end: every round goes
}

func newBusyNode(t *testing.T, key string) *busyNode {
	bn := &busyNode{key: key, sent: make(chan []string, 100), next: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(func() { close(bn.done) }) // before the client's Close
	return bn
}

func (bn *busyNode) option() rlock.ClientOption {
	return func(c *core.Config) error {
		c.Watchdog = append(c.Watchdog, renewal.WithSendHook(func(_ string, keys []string) {
			if !slices.Contains(keys, bn.key) {
				return
			}
			bn.sent <- keys
			select {
			case <-bn.next:
			case <-bn.done:
			}
		}))
		return nil
	}
}

// parked waits until a tick came due while the held round was in flight.
func parked(t *testing.T, c *rlock.Client) {
	require.Eventually(t, func() bool { return c.WatchdogStats().Late > 0 }, 10*time.Second, time.Millisecond, "no tick parked the node's leases")
}

// A watchdog round parked while the node was busy was sent without
// checking which of its leases were stopped meanwhile: SetLease(1 s)
// during a busy round stopped renewal and waited for the round in flight
// (StopAndWait), set the lease, and the parked round then set the
// watchdog's lease again. The holder was told at 1 s that it lost the
// lock, which stayed in Redis for the whole watchdog lease, taken by
// nobody. The explicit lease holds: the lock is gone when it runs out.
func TestSetLeaseOnBusyNodeOutlivedByParkedRenewal(t *testing.T) {
	const wdLease, interval, lease = 10 * time.Second, 200 * time.Millisecond, time.Second
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		bn := newBusyNode(t, name)
		c := newClient(t, b, rlock.WithWatchdogLease(wdLease), rlock.WithWatchdogInterval(interval), bn.option())
		l := newLock(t, c, name)
		require.NoError(t, l.Lock(ctx))
		<-bn.sent // the first round is in flight
		parked(t, c)

		set := make(chan error, 1)
		go func() { set <- l.SetLease(ctx, lease) }()
		require.Eventually(t, func() bool { return c.WatchdogStats().Registered == 0 }, 10*time.Second, time.Millisecond, "SetLease did not stop renewal")
		bn.next <- struct{}{} // the round in flight ends; SetLease goes on
		select {
		case err := <-set:
			require.NoError(t, err)
		case keys := <-bn.sent: // StopAndWait now waits for it, SetLease for ever
			close(bn.next)
			require.NoError(t, <-set)
			t.Fatalf("a parked round renewed %v after SetLease stopped renewal", keys)
		}
		close(bn.next) // any round parked meanwhile goes too

		rdb := b.NewClient(t)
		require.Eventually(t, func() bool { return rdb.Exists(ctx, name).Val() == 0 }, lease+2*time.Second, 10*time.Millisecond,
			"the lock outlived its lease: PTTL %v (a parked renewal set the watchdog's lease again)", rdb.PTTL(ctx, name).Val())
		require.ErrorIs(t, l.Err(), rlock.ErrLockLost)
		require.NoError(t, newLock(t, newClient(t, b), name).TryLock(ctx), "another owner takes the lock")
	})
}

// The same after Unlock and a re-acquisition with an explicit lease: Unlock
// stops renewal without waiting for a round in flight, so a round parked
// or in flight then renewed the new hold of the same owner with the
// watchdog's lease. A renewal on its way when Unlock returns is waited for
// before the same owner's next acquisition is sent.
func TestReacquireWithLeaseOnBusyNodeOutlivedByRenewal(t *testing.T) {
	const wdLease, interval, lease = 10 * time.Second, 200 * time.Millisecond, time.Second
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		bn := newBusyNode(t, name)
		c := newClient(t, b, rlock.WithWatchdogLease(wdLease), rlock.WithWatchdogInterval(interval), bn.option())
		l := newLock(t, c, name)
		require.NoError(t, l.Lock(ctx))
		<-bn.sent // the first round is in flight (not yet on the wire)
		parked(t, c)
		took := make(chan error, 1)
		go func() {
			if err := l.Unlock(ctx); err != nil {
				took <- err
				return
			}
			took <- l.LockLease(ctx, lease)
		}()
		select {
		case err := <-took: // the round in flight was not waited for
			require.NoError(t, err)
			close(bn.next)
		case bn.next <- struct{}{}: // it was: the round ends, Unlock and LockLease go on
			// Let every later round go too before waiting: a tick due
			// meanwhile may start a round with the lease still in it,
			// which Unlock's StopAndWait then waits for.
			close(bn.next)
			require.NoError(t, <-took)
		}

		rdb := b.NewClient(t)
		require.Eventually(t, func() bool { return rdb.Exists(ctx, name).Val() == 0 }, lease+2*time.Second, 10*time.Millisecond,
			"the lock outlived its lease: PTTL %v (a renewal set the watchdog's lease again)", rdb.PTTL(ctx, name).Val())
		require.ErrorIs(t, l.Err(), rlock.ErrLockLost)
		require.NoError(t, newLock(t, newClient(t, b), name).TryLock(ctx), "another owner takes the lock")
	})
}
