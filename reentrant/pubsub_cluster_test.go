package reentrant_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/reentrant"
)

// TestClusterWaitersKeepWakeUpsAcrossMigrationAndFailover: waiters in
// sharded and auto pub/sub mode block on a lock whose lease is an hour;
// while they wait, its slot moves to another master, and later that
// master is killed and its replica promoted. Each time the holder's
// release reaches both waiters (woken by the message, or by the
// confirmation of the subscription the hub made again at the slot's new
// master, which makes them retry): no wake-up is lost, so both get the
// lock long before any lease or poll would hand it over.
func TestClusterWaitersKeepWakeUpsAcrossMigrationAndFailover(t *testing.T) {
	c := redistest.StartCluster(t) // slots are moved and masters killed
	name := redistest.Name(t)
	slot := base.Slot(name)
	holderCC := c.NewClient(t)
	holder := newLock(t, clientOn(t, holderCC), name, reentrant.WithLease(time.Hour))
	var waiters []*reentrant.Lock
	var clients []*rlock.Client
	for _, m := range []rlock.PubSubMode{rlock.PubSubSharded, rlock.PubSubAuto} {
		wc := clientOn(t, c.NewClient(t), rlock.WithPubSubMode(m), rlock.WithMaxPoll(time.Hour))
		clients = append(clients, wc)
		waiters = append(waiters, newLock(t, wc, name, reentrant.WithLease(time.Hour)))
	}
	round := func(fault func()) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
		defer cancel()
		require.NoError(t, holder.Lock(ctx))
		done := make(chan error, len(waiters))
		for _, w := range waiters {
			go func() {
				err := w.Lock(ctx)
				if err == nil {
					err = w.Unlock(ctx)
				}
				done <- err
			}()
		}
		waitWaiting(t, clients)
		fault()
		require.NoError(t, holder.Unlock(ctx))
		for range waiters {
			require.NoError(t, <-done)
		}
	}

	from := c.MasterFor(t, slot)
	var to *redistest.Server
	for _, m := range c.Masters(t) {
		if m.Addr() != from.Addr() {
			to = m
			break
		}
	}
	round(func() { c.MigrateSlot(t, slot, to) })
	round(func() {
		to.WaitReplicasCaughtUp(t)
		to.Kill()
		c.WaitFailover(t, to, slot)
		c.Reroute(t, holderCC)
	})
}

// waitWaiting waits until every client has one blocked Lock call.
func waitWaiting(t *testing.T, cs []*rlock.Client) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, c := range cs {
			if c.Waiters().Waiters != 1 {
				return false
			}
		}
		return true
	}, 10*time.Second, time.Millisecond)
}
