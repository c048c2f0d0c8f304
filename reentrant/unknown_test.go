package reentrant_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/core"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/reentrant"
)

// Regression tests for calls whose outcome is unknown (their script may or
// may not have run): what the handle reports, what the client keeps, and
// which failures are not unknown at all.

// shortTimeouts makes a blackholed command fail fast and go-redis send it
// once, so a lost reply is the caller's error.
func shortTimeouts(o *redis.Options) {
	o.MaxRetries = -1
	o.ReadTimeout = 200 * time.Millisecond
	o.WriteTimeout = 200 * time.Millisecond
}

// A SetLease whose reply was lost (the script ran: the TTL is the new,
// shorter lease) re-registered the watchdog counted from the failed call's
// send: Until stayed a whole watchdog lease (or the old explicit lease)
// ahead and Err nil while another client took the lock once the new lease
// ran out. Until must be the earliest the server's TTL can end, and the
// holding must end as lost once that passes unconfirmed.
func TestFailedSetLeaseDoesNotOverstateUntil(t *testing.T) {
	const wdLease = 3 * time.Second
	cases := []struct {
		name  string
		take  func(ctx context.Context, l *reentrant.Lock) error
		lease time.Duration // the lease SetLease asks for
		want  time.Duration // the TTL the lost call set
	}{
		{"watchdog-to-lease", func(ctx context.Context, l *reentrant.Lock) error { return l.Lock(ctx) }, 500 * time.Millisecond, 500 * time.Millisecond},
		{"lease-to-shorter-lease", func(ctx context.Context, l *reentrant.Lock) error { return l.LockLease(ctx, time.Minute) }, 500 * time.Millisecond, 500 * time.Millisecond},
		{"lease-to-watchdog", func(ctx context.Context, l *reentrant.Lock) error { return l.LockLease(ctx, time.Minute) }, rlock.WatchdogMode, wdLease},
	}
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				ctx := context.Background()
				name := redistest.Name(t)
				proxy, viaProxy := b.NewProxiedClient(t, shortTimeouts)
				c := clientOn(t, viaProxy, shortWatchdog(wdLease), rlock.WithoutReplicaSync())
				redistest.LoadScripts(t, viaProxy)
				l := newLock(t, c, name)
				require.NoError(t, tc.take(ctx, l))

				// The script runs, its reply is lost, and Redis is out of
				// reach from then on: nothing can confirm anything.
				proxy.DropNextReplyThen("evalsha", func() { proxy.Blackhole(true) })
				require.Error(t, l.SetLease(ctx, tc.lease))
				returned := time.Now()
				require.Equal(t, 1, proxy.Dropped())
				require.False(t, l.Until().After(returned.Add(tc.want)),
					"Until is %v after the call, past the %v the lost SetLease set", l.Until().Sub(returned), tc.want)

				other := newLock(t, newClient(t, b), name)
				require.Eventually(t, func() bool { return other.TryLock(ctx) == nil }, tc.want+5*time.Second, 10*time.Millisecond,
					"the lost SetLease ran: the lock expires after its lease")
				now := time.Now()
				require.False(t, l.Err() == nil && l.Until().After(now),
					"another owner holds the lock while the first holding goes on (Until %v ahead)", l.Until().Sub(now))
				require.Eventually(t, func() bool { return errors.Is(l.Err(), rlock.ErrLockLost) }, 5*time.Second, time.Millisecond)
			})
		}
	})
}

// With an owner per request, every call during an outage whose outcome was
// unknown left an owner record that its one background settle (tried while
// Redis was still away) never cleared: 20 calls, 20 records for ever.
// Settling tries again until Redis answers, then the records go.
func TestUnsureRecordsAreForgottenAfterOutage(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		name := redistest.Name(t)
		proxy, viaProxy := b.NewProxiedClient(t, shortTimeouts)
		c := clientOn(t, viaProxy, rlock.WithoutReplicaSync())
		redistest.LoadScripts(t, viaProxy)
		l := newLock(t, c, name)

		proxy.Blackhole(true)
		const calls = 20
		var wg sync.WaitGroup
		errs := make(chan error, calls)
		for i := range calls {
			wg.Go(func() {
				errs <- l.TryLock(rlock.WithOwner(context.Background(), "request-"+strconv.Itoa(i)))
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.Error(t, err, "Redis was out of reach")
		}
		require.Equal(t, calls, core.Records(c), "each call's outcome is unknown until Redis answers")
		proxy.Blackhole(false)
		require.Eventually(t, func() bool { return core.Records(c) == 0 }, 10*time.Second, 10*time.Millisecond,
			"%d owner records kept after Redis came back", core.Records(c))
		n, err := b.NewClient(t).Exists(context.Background(), name).Result()
		require.NoError(t, err)
		require.Zero(t, n)
	})
}

// Closing the client during an outage ends the settles still trying.
func TestCloseEndsSettleRetries(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ignore := goleak.IgnoreCurrent()
		t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // after every cleanup below
		proxy, viaProxy := b.NewProxiedClient(t, shortTimeouts)
		c, err := rlock.NewClient(viaProxy, rlock.WithoutReplicaSync())
		require.NoError(t, err)
		l := newLock(t, c, redistest.Name(t))
		proxy.Blackhole(true)
		require.Error(t, l.TryLock(context.Background()))
		require.Equal(t, 1, core.Records(c))
		require.NoError(t, c.Close())
	})
}

// A TryLock that failed before its script was sent (here asking the server
// for its replica count, or dialling it) was taken for a call whose outcome
// is unknown: its owner was kept to be settled, and the next call first
// "settled an earlier call whose outcome is unknown", an extra round trip
// and a misleading error.
func TestTryLockFailingBeforeSendIsNotUnknown(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		t.Run("replica-count", func(t *testing.T) {
			name := redistest.Name(t)
			proxy, viaProxy := b.NewProxiedClient(t, shortTimeouts)
			c := clientOn(t, viaProxy) // replica sync: INFO replication first
			l := newLock(t, c, name)
			proxy.Blackhole(true)
			err := l.TryLock(ctx)
			require.ErrorContains(t, err, "replicas")
			require.Zero(t, core.Records(c), "a call that sent no script is kept to be settled")
			err = l.TryLock(ctx)
			require.Error(t, err)
			require.NotContains(t, err.Error(), "settling", "the next call settles a call that sent nothing")
			proxy.Blackhole(false)
			require.NoError(t, l.TryLock(ctx))
			require.NoError(t, l.Unlock(ctx))
		})
		t.Run("dial", func(t *testing.T) {
			proxy, viaProxy := b.NewProxiedClient(t, shortTimeouts)
			proxy.Close() // connections refused
			c := clientOn(t, viaProxy, rlock.WithoutReplicaSync())
			l := newLock(t, c, redistest.Name(t))
			err := l.TryLock(ctx)
			require.Error(t, err)
			require.Zero(t, core.Records(c), "a call refused a connection is kept to be settled")
			err = l.TryLock(ctx)
			require.Error(t, err)
			require.NotContains(t, err.Error(), "settling", "the next call settles a call that sent nothing")
		})
	})
}
