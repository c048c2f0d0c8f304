package reentrant_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/reentrant"
)

// TestClusterRedissonWakeUps: on the 3+3 cluster (Redis 7), a Redisson
// client in either publish mode (sharded: its default there; classic:
// shardedSubscriptionMode OFF) and an rlock client in the default mode
// wake each other's waiters, on locks in every master's slots: a Redisson
// unlock or forceUnlock wakes a blocked rlock Lock, and an rlock Unlock or
// ForceUnlock wakes a blocked Redisson lock(). Leases and max-poll are an
// hour: only a wake-up can hand the lock over in time.
func TestClusterRedissonWakeUps(t *testing.T) {
	c := redistest.SharedCluster(t)
	for _, sharded := range []bool{true, false} {
		t.Run(map[bool]string{true: "sharded", false: "classic"}[sharded], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			rs := redistest.NewRedisson(c.NewClient(t), sharded)
			rc := clientOn(t, c.NewClient(t), rlock.WithMaxPoll(time.Hour))
			thread := int64(0)
			var slowest [2]time.Duration // release to grant: Redisson to rlock, rlock to Redisson
			defer func() { t.Logf("slowest handoff: Redisson to rlock %v, rlock to Redisson %v", slowest[0], slowest[1]) }()
			for name := range clusterNames(t, c) {
				thread++
				r := rs.Lock(name, thread)
				l := newLock(t, rc, name, reentrant.WithLease(time.Hour))
				for _, force := range []bool{false, true} {
					// Redisson holds, rlock waits.
					require.NoError(t, r.Lock(ctx, time.Hour))
					got := make(chan error, 1)
					go func() { got <- l.Lock(ctx) }()
					require.Eventually(t, func() bool { return rc.Waiters().Waiters == 1 }, 10*time.Second, time.Millisecond)
					start := time.Now()
					if force {
						_, err := r.ForceUnlock(ctx)
						require.NoError(t, err)
					} else {
						require.NoError(t, r.Unlock(ctx))
					}
					require.NoError(t, <-got, "%s: rlock woken by Redisson (force %v)", name, force)
					slowest[0] = max(slowest[0], time.Since(start))

					// rlock holds, Redisson waits.
					rgot := make(chan error, 1)
					go func() { rgot <- r.Lock(ctx, time.Hour) }()
					waitSubscribers(ctx, t, c, name, sharded)
					start = time.Now()
					if force {
						_, err := l.ForceUnlock(ctx)
						require.NoError(t, err)
					} else {
						require.NoError(t, l.Unlock(ctx))
					}
					require.NoError(t, <-rgot, "%s: Redisson woken by rlock (force %v)", name, force)
					slowest[1] = max(slowest[1], time.Since(start))
					require.NoError(t, r.Unlock(ctx))
				}
			}
		})
	}
}

// waitSubscribers waits until the Redisson waiter of name has subscribed.
func waitSubscribers(ctx context.Context, t *testing.T, c *redistest.Cluster, name string, sharded bool) {
	t.Helper()
	cc := c.NewClient(t)
	ch := "redisson_lock__channel:{" + name + "}"
	if strings.Contains(name, "{") {
		ch = "redisson_lock__channel:" + name
	}
	require.Eventually(t, func() bool {
		if sharded {
			n, err := cc.PubSubShardNumSub(ctx, ch).Result()
			return err == nil && n[ch] >= 1
		}
		var total atomic.Int64
		_ = cc.ForEachShard(ctx, func(ctx context.Context, m *redis.Client) error {
			n, err := m.PubSubNumSub(ctx, ch).Result()
			if err == nil {
				total.Add(n[ch])
			}
			return nil
		})
		return total.Load() >= 1
	}, 10*time.Second, time.Millisecond)
}
