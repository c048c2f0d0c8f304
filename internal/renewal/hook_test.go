package renewal_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/internal/renewal"
)

// TestRoundHook: each round is reported with how many locks it carried
// and what became of them; the lock found gone is lost with the cause
// not_held_at_renewal, and a round on an unreachable server reports its
// error, and the lock's loss when its lease runs out names renewal_failed.
func TestRoundHook(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rdb := b.NewClient(t, func(o *redis.Options) { o.MaxRetries = -1 })
		rounds := make(chan renewal.Round, 64)
		const lease = 600 * time.Millisecond
		s := newScheduler(t, rdb, renewal.WithLease(lease), renewal.WithRoundHook(func(r renewal.Round) { rounds <- r }))
		name := redistest.Name(t)
		hold(t, rdb, name+":held", "c:1", lease)
		lost := make(lossLog, 2)
		s.Add(name+":held", "c:1", time.Now(), lost.report)
		s.Add(name+":gone", "c:1", time.Now(), lost.report)
		r := <-rounds
		require.Equal(t, renewal.Round{Node: r.Node, Locks: 2, Renewed: 1, NotHeld: 1, Latency: r.Latency}, r)
		require.Positive(t, r.Latency)
		err := <-lost
		require.ErrorIs(t, err, rlock.ErrLockLost)
		require.Equal(t, base.LossNotHeldAtRenewal, base.LossCause(err))

		require.NoError(t, rdb.Close()) // every renewal fails from now on
		for r = <-rounds; r.Failed == 0; r = <-rounds {
		}
		require.Equal(t, 1, r.Locks)
		require.Error(t, r.Err)
		err = <-lost
		require.Equal(t, base.LossRenewalFailed, base.LossCause(err), err)
	})
}

func TestRoundHookNil(t *testing.T) {
	_, err := renewal.New(redistest.Mini(t).NewClient(t), renewal.WithRoundHook(nil))
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
}
