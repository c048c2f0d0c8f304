package renewal_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/internal/renewal"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(redistest.StopSharedAfter(m))
}

func newScheduler(t *testing.T, rdb redis.Scripter, opts ...renewal.Option) *renewal.Scheduler {
	t.Helper()
	s, err := renewal.New(rdb, opts...)
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// hold writes a lock hash the way an acquire does.
func hold(t *testing.T, rdb *redis.Client, key, field string, lease time.Duration) {
	t.Helper()
	require.NoError(t, rdb.HSet(context.Background(), key, field, 1).Err())
	require.NoError(t, rdb.PExpire(context.Background(), key, lease).Err())
}

type lossLog chan error

func (l lossLog) report(err error) { l <- err }

// A tick renews every lock in one round trip: 250 locks, 100 per script
// call, go out as three script calls in one pipeline.
func TestOneRoundTripPerTick(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rdb := b.NewClient(t)
		calls := &redistest.ScriptCalls{}
		rdb.AddHook(calls)
		// A long lease, renewed often: adding 250 locks on a loaded machine
		// must not outlast it.
		const lease, n = 5 * time.Second, 250
		s := newScheduler(t, rdb, renewal.WithLease(lease), renewal.WithInterval(300*time.Millisecond))
		base := redistest.Name(t)
		lost := make(lossLog, n)
		for i := range n {
			key := fmt.Sprintf("%s:%d", base, i)
			hold(t, rdb, key, "c:1", lease)
			s.Add(key, "c:1", time.Now(), lost.report)
		}
		// Rounds may have started while locks were still being added; count
		// from the first one that renewed them all.
		require.Eventually(t, func() bool { return s.Stats().Renewed >= n }, 10*time.Second, time.Millisecond)
		from, fromCalls := s.Stats(), calls.N()
		require.Eventually(t, func() bool { return s.Stats().Ticks >= from.Ticks+3 }, 10*time.Second, time.Millisecond)
		st, sent := s.Stats(), calls.N()-fromCalls
		require.Zero(t, st.Errors)
		require.Zero(t, st.Lost)
		require.Equal(t, n, st.Registered)
		// Every round trip carries ceil(250/100) = 3 script calls; one per
		// tick (unless a slow machine made a round time out and be
		// retried); a round may be in flight at either snapshot.
		trips := st.RoundTrips - from.RoundTrips
		require.InDelta(t, 3*trips, sent, 3)
		if st.Timeouts == from.Timeouts {
			require.InDelta(t, st.Ticks-from.Ticks, trips, 1)
		}
		require.Len(t, lost, 0)
		ttl, err := rdb.PTTL(context.Background(), base+":7").Result()
		require.NoError(t, err)
		require.Greater(t, ttl, lease-time.Second, "renewed")
	})
}

func TestReportsLockNotHeldAtRenewal(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.NewClient(t)
		const lease = 300 * time.Millisecond
		s := newScheduler(t, rdb, renewal.WithLease(lease))
		name := redistest.Name(t)
		kept, gone, taken := name+":kept", name+":gone", name+":taken"
		for _, k := range []string{kept, gone, taken} {
			hold(t, rdb, k, "c:1", lease)
		}
		keptLost, goneLost, takenLost := make(lossLog, 1), make(lossLog, 1), make(lossLog, 1)
		now := time.Now()
		s.Add(kept, "c:1", now, keptLost.report)
		s.Add(gone, "c:1", now, goneLost.report)
		s.Add(taken, "c:1", now, takenLost.report)
		require.NoError(t, rdb.Del(ctx, gone).Err())
		require.NoError(t, rdb.Del(ctx, taken).Err())
		hold(t, rdb, taken, "someone-else:1", time.Minute)

		for _, ch := range []lossLog{goneLost, takenLost} {
			select {
			case err := <-ch:
				require.ErrorIs(t, err, rlock.ErrLockLost)
			case <-time.After(5 * time.Second):
				t.Fatal("loss not reported")
			}
		}
		require.Eventually(t, func() bool { return s.Stats().Rounds >= 3 }, 5*time.Second, time.Millisecond)
		require.Len(t, keptLost, 0)
		require.Equal(t, 1, s.Stats().Registered)
		ttl, err := rdb.PTTL(ctx, taken).Result()
		require.NoError(t, err)
		require.Greater(t, ttl, 50*time.Second, "another owner's lock is not touched")
	})
}

func TestRetriesUntilLeaseRunsOut(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		direct := b.NewClient(t)
		proxy, rdb := b.NewProxiedClient(t, func(o *redis.Options) {
			o.ReadTimeout = 50 * time.Millisecond
			o.MaxRetries = -1
		})
		const lease = 600 * time.Millisecond
		s := newScheduler(t, rdb, renewal.WithLease(lease))
		name := redistest.Name(t)
		hold(t, direct, name, "c:1", lease)
		lost := make(lossLog, 1)
		s.Add(name, "c:1", time.Now(), lost.report)
		require.Eventually(t, func() bool { return s.Stats().Renewed >= 1 }, 5*time.Second, time.Millisecond)

		// A short outage: errors are retried, nothing is reported.
		proxy.Blackhole(true)
		require.Eventually(t, func() bool { return s.Stats().Errors >= 2 }, 5*time.Second, time.Millisecond)
		proxy.Blackhole(false)
		proxy.ResetAll()
		renewed := s.Stats().Renewed
		require.Eventually(t, func() bool { return s.Stats().Renewed > renewed }, 5*time.Second, time.Millisecond)
		require.Len(t, lost, 0)

		// A long one: reported once the lease has run out, not before.
		proxy.Blackhole(true)
		cut := time.Now()
		var err error
		select {
		case err = <-lost:
		case <-time.After(5 * time.Second):
			t.Fatal("loss not reported")
		}
		require.ErrorIs(t, err, rlock.ErrLockLost)
		require.GreaterOrEqual(t, time.Since(cut), lease-s.Interval(), "reported before the lease could have run out")
		// The report comes no later than the server's expiry (the lease is
		// counted from when the last renewal was sent, before it arrived).
		require.Eventually(t, func() bool {
			n, err := direct.Exists(ctx, name).Result()
			return err == nil && n == 0
		}, time.Second, time.Millisecond)
		require.Zero(t, s.Stats().Registered)
		proxy.Blackhole(false)
		proxy.ResetAll()
	})
}

func TestStopAndClose(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rdb := b.NewClient(t)
		const lease = 300 * time.Millisecond
		s, err := renewal.New(rdb, renewal.WithLease(lease))
		require.NoError(t, err)
		name := redistest.Name(t)
		hold(t, rdb, name, "c:1", lease)
		lost := make(lossLog, 2)
		l := s.Add(name, "c:1", time.Now(), lost.report)
		require.Eventually(t, func() bool { return s.Stats().Renewed >= 1 }, 5*time.Second, time.Millisecond)
		l.Stop()
		l.Stop()
		rounds := s.Stats().Rounds
		// Nothing registered: the key expires, nothing is reported.
		require.Eventually(t, func() bool {
			n, err := rdb.Exists(context.Background(), name).Result()
			return err == nil && n == 0
		}, 5*time.Second, 10*time.Millisecond)
		require.LessOrEqual(t, s.Stats().Rounds, rounds+1)
		require.Len(t, lost, 0)

		s.Add(name, "c:1", time.Now(), lost.report) // restarts the goroutines
		s.Close()
		s.Close()
		s.Add(name, "c:1", time.Now(), lost.report)
		require.ErrorIs(t, <-lost, rlock.ErrClosed, "Add after Close reports at once")
	})
}

func TestOptionsValidation(t *testing.T) {
	_, err := renewal.New(nil)
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	for _, o := range []renewal.Option{
		renewal.WithLease(time.Millisecond),
		renewal.WithInterval(0),
		renewal.WithBatchSize(-1),
		renewal.WithBatchSize(10001),
	} {
		_, err := renewal.New(rdb, o)
		require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	}
	s, err := renewal.New(rdb, nil)
	require.NoError(t, err)
	require.Equal(t, renewal.DefaultLease, s.LeaseDuration())
	require.Equal(t, renewal.DefaultLease/3, s.Interval())
	s.Close()
}
