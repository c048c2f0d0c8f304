package faults

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/lua"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/multilock"
	"github.com/rlock-go/rlock/reentrant"
	"github.com/rlock-go/rlock/rwlock"
)

// The tests of this file drive the meetings where what a handle says and
// what Redis holds parted ways (defects 1-5 of the holder-vs-server
// review) with the claims check sampling throughout. Each of 1, 2, 3 and
// 5 failed on the code before its fix. Defect 4's workload could not be
// made to fail (the renewal has to be parked at the exact moment of
// SetLease); its regression tests are TestParkedRoundOutlivesStopAndWait
// (internal/renewal) and TestSetLeaseOnBusyNodeOutlivedByParkedRenewal
// (reentrant), and this workload runs only with RLOCK_CHECK_DEFECT4=1.

// unreproduced skips a workload that is not yet a working check unless
// RLOCK_CHECK_DEFECT4=1.
func unreproduced(t *testing.T) {
	t.Helper()
	if os.Getenv("RLOCK_CHECK_DEFECT4") != "1" {
		t.Skip("defect 4's workload does not reproduce the defect yet (RLOCK_CHECK_DEFECT4=1 runs it)")
	}
}

// sampling runs cc every 2 ms until the returned func is called, which
// stops it and reports its verdict on t.
func sampling(t *testing.T, cc *claimCheck, label string) func() {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		cc.run(stop, 2*time.Millisecond)
	}()
	return func() {
		close(stop)
		<-done
		cc.report(t, label)
	}
}

// observe lets the sampler watch for d (leases run out meanwhile: the
// wait is the point, not a synchronisation).
func observe(d time.Duration) { time.Sleep(d) }

func owner(t *testing.T, h interface {
	Owner(context.Context) (string, error)
}) string {
	t.Helper()
	f, err := h.Owner(context.Background())
	require.NoError(t, err)
	return f
}

// TestClaimsReadReentryMixedLeases (defect 1): a reader re-enters with a
// lease of another length and releases one hold; the other hold's lease
// decides when the server lets a writer in, and the handle must not say
// it holds past it.
func TestClaimsReadReentryMixedLeases(t *testing.T) {
	for _, order := range []struct {
		name         string
		first, again time.Duration
	}{{"long_then_short", 2 * time.Second, 300 * time.Millisecond}, {"short_then_long", 300 * time.Millisecond, 2 * time.Second}} {
		t.Run(order.name, func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				ctx := context.Background()
				name := redistest.Name(t)
				c := newTestClient(t, b.NewClient(t))
				l, err := rwlock.New(c, name)
				require.NoError(t, err)
				wc := newTestClient(t, b.NewClient(t))
				writer, err := rwlock.New(wc, name)
				require.NoError(t, err)
				var act, wact activity
				cc := newClaimCheck(t, 300*time.Millisecond, b.Universal(t))
				field := owner(t, l.ReadLock())
				cc.add(handleClaim("reader", l.ReadLock(), &act, 0, name, field, true))
				wfield := owner(t, writer.WriteLock())
				cc.add(handleClaim("writer", writer.WriteLock(), &wact, 0, name, base.WriterField(wfield), false))
				stop := sampling(t, cc, "defect 1")
				func() {
					defer act.begin(false)()
					require.NoError(t, l.ReadLock().LockLease(ctx, order.first))
					require.NoError(t, l.ReadLock().LockLease(ctx, order.again))
				}()
				func() {
					defer act.begin(true)()
					require.NoError(t, l.ReadLock().Unlock(ctx)) // one of two
				}()
				// A writer takes the lock as soon as the server lets it.
				deadline := time.Now().Add(2500 * time.Millisecond)
				for time.Now().Before(deadline) {
					end := wact.begin(false)
					err := writer.WriteLock().TryLockLease(ctx, 5*time.Second)
					end()
					if err == nil {
						break
					}
					observe(20 * time.Millisecond)
				}
				observe(200 * time.Millisecond)
				stop()
			})
		})
	}
}

// TestClaimsWriteLeaseOutlivedBySameOwnersRead (defect 2): an owner holds
// the write lock with a short lease and takes a read with a longer one;
// when the write lease runs out the handle says so, and the server must
// not keep the write hold under the read's TTL.
func TestClaimsWriteLeaseOutlivedBySameOwnersRead(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		c := newTestClient(t, b.NewClient(t))
		l, err := rwlock.New(c, name)
		require.NoError(t, err)
		var act activity
		cc := newClaimCheck(t, 300*time.Millisecond, b.Universal(t))
		field := owner(t, l.ReadLock())
		cc.add(handleClaim("read side", l.ReadLock(), &act, 0, name, field, true))
		cc.add(handleClaim("write side", l.WriteLock(), &act, 0, name, base.WriterField(field), false))
		stop := sampling(t, cc, "defect 2")
		func() {
			defer act.begin(false)()
			require.NoError(t, l.WriteLock().LockLease(ctx, 300*time.Millisecond))
			require.NoError(t, l.ReadLock().LockLease(l.WriteLock().Ctx(), 2*time.Second)) // a downgrade
		}()
		observe(1500 * time.Millisecond)
		stop()
	})
}

// TestClaimsSetLeaseReplyLost (defect 3): a hold's SetLease to a short
// lease runs on the server but its reply is lost (retries off): the handle
// must not go on saying it holds until the end of its former lease (an
// explicit 3 s lease, or the watchdog's).
func TestClaimsSetLeaseReplyLost(t *testing.T) {
	for _, first := range []time.Duration{3 * time.Second, rlock.WatchdogMode} {
		t.Run("lease_"+first.String(), func(t *testing.T) { testSetLeaseReplyLost(t, first) })
	}
}

func testSetLeaseReplyLost(t *testing.T, first time.Duration) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		loadScripts(t, b.Universal(t)) // the lost reply is one of a script that ran, not a NOSCRIPT
		proxy := redistest.NewProxy(t, b.Addr)
		rdb := b.NewClient(t, func(o *redis.Options) { o.Addr = proxy.Addr(); o.MaxRetries = -1 })
		c := newTestClient(t, rdb, rlock.WithWatchdogLease(3*time.Second))
		l, err := reentrant.New(c, name)
		require.NoError(t, err)
		var act activity
		cc := newClaimCheck(t, 300*time.Millisecond, b.Universal(t))
		cc.add(handleClaim("holder", l, &act, 0, name, owner(t, l), false))
		stop := sampling(t, cc, "defect 3")
		func() {
			defer act.begin(false)()
			require.NoError(t, l.LockLease(ctx, first))
		}()
		func() {
			defer act.begin(true)()
			proxy.DropNextReply("evalsha")
			err := l.SetLease(ctx, 300*time.Millisecond)
			t.Logf("SetLease with its reply lost: %v; the handle says: Err %v, Until in %v", err, l.Err(), time.Until(l.Until()).Round(time.Millisecond))
		}()
		observe(1200 * time.Millisecond)
		stop()
		_ = l.Unlock(ctx)
	})
}

// TestClaimsSetLeaseDuringBusyRenewal (defect 4): the node is slow (every
// round trip longer than the renewal interval), so renewal rounds queue
// behind each other; SetLease(1s) on a watchdog hold must not be
// overwritten by a round that waited while StopAndWait returned.
// NOT YET A CHECK: on the code before the fix this run did not make the
// round wait at the moment of SetLease (0 violations on both backends; on
// redis-server the hold was lost to the slow renewals first); the timing
// needs work, see wip-check.md.
func TestClaimsSetLeaseDuringBusyRenewal(t *testing.T) {
	unreproduced(t)
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		proxy := redistest.NewProxy(t, b.Addr)
		rdb := b.NewClient(t, func(o *redis.Options) {
			o.Addr = proxy.Addr()
			o.ReadTimeout, o.WriteTimeout = 10*time.Second, 10*time.Second
		})
		c := newTestClient(t, rdb, rlock.WithWatchdogLease(4*time.Second))
		other, err := reentrant.New(c, name+":other") // keeps the node busy
		require.NoError(t, err)
		l, err := reentrant.New(c, name)
		require.NoError(t, err)
		var act activity
		cc := newClaimCheck(t, time.Second, b.Universal(t))
		cc.add(handleClaim("holder", l, &act, 0, name, owner(t, l), false))
		stop := sampling(t, cc, "defect 4")
		func() {
			defer act.begin(false)()
			require.NoError(t, other.Lock(ctx))
			observe(400 * time.Millisecond) // the two leases tick apart
			require.NoError(t, l.Lock(ctx))
		}()
		proxy.SetLatency(600 * time.Millisecond) // a round trip of 1.2 s or more: the node stays busy
		observe(2 * time.Second)
		func() {
			defer act.begin(true)()
			err := l.SetLease(ctx, time.Second)
			t.Logf("SetLease(1s) on a busy node: %v", err)
		}()
		observe(4 * time.Second)
		proxy.SetLatency(0)
		stop()
		_ = l.Unlock(ctx)
		_ = other.Unlock(ctx)
	})
}

// TestClaimsQuorumSetLeaseOverOuterHold (defect 5): an owner holds a lock
// in watchdog mode, then takes a quorum MultiLock that has that lock as a
// member (a re-entry there), sets the MultiLock's lease short and
// releases it. The outer hold was not the MultiLock's to shorten: it must
// stay protected by the watchdog, its handle holding, the server covering.
func TestClaimsQuorumSetLeaseOverOuterHold(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := rlock.WithOwner(context.Background(), "o1")
		name := redistest.Name(t)
		c := newTestClient(t, b.NewClient(t), rlock.WithWatchdogLease(3*time.Second))
		var members []rlock.Locker
		var act activity
		cc := newClaimCheck(t, 300*time.Millisecond, b.Universal(t))
		for _, n := range []string{"a", "b", "c"} {
			l, err := reentrant.New(c, name+":"+n)
			require.NoError(t, err)
			members = append(members, l)
			f, err := l.Owner(ctx)
			require.NoError(t, err)
			cc.add(handleClaim("member "+n, l, &act, 0, l.Name(), f, false))
		}
		outer, err := reentrant.New(c, name+":c")
		require.NoError(t, err)
		field, err := outer.Owner(ctx)
		require.NoError(t, err)
		cc.add(handleClaim("outer hold", outer, &act, 0, outer.Name(), field, false))
		ml, err := multilock.New(members, multilock.WithQuorum(2))
		require.NoError(t, err)
		mc := &claim{label: "quorum MultiLock", h: ml, act: &act, quorum: 2}
		for _, m := range members {
			mc.members = append(mc.members, member{name: m.Name(), field: field})
		}
		cc.add(mc)
		stop := sampling(t, cc, "defect 5")
		func() {
			defer act.begin(false)()
			require.NoError(t, outer.Lock(ctx))
			require.NoError(t, ml.Lock(ctx))
		}()
		func() {
			defer act.begin(true)()
			require.NoError(t, ml.SetLease(ctx, 300*time.Millisecond))
			require.NoError(t, ml.Unlock(ctx))
		}()
		observe(1500 * time.Millisecond)
		stop()
		require.NoError(t, outer.Err(), "the outer hold, taken in watchdog mode before the MultiLock, was lost")
		_ = outer.Unlock(ctx)
	})
}

// loadScripts caches every script on the server behind rdb.
func loadScripts(t *testing.T, rdb redis.UniversalClient) {
	t.Helper()
	for _, s := range lua.All() {
		require.NoError(t, s.Load(context.Background(), rdb).Err())
	}
}

func newTestClient(t *testing.T, rdb rlock.Redis, opts ...rlock.ClientOption) *rlock.Client {
	t.Helper()
	c, err := rlock.NewClient(rdb, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}
