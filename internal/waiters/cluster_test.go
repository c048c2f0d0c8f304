package waiters_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/internal/waiters"
)

func hubOn(t *testing.T, rdb waiters.Subscriber, mode waiters.Mode) *waiters.Hub {
	t.Helper()
	h, err := waiters.New(rdb, mode)
	require.NoError(t, err)
	t.Cleanup(h.Close)
	return h
}

// quietFor reports whether w gets no signal for d. Used only after a
// positive signal that was published later, on the same shard, than the
// message that must not arrive.
func quietFor(w *waiters.Waiter, d time.Duration) bool {
	select {
	case <-w.C:
		return false
	case <-time.After(d):
		return true
	}
}

// TestClusterPubSubModes: on the 3+3 cluster, a hub in each mode, with
// channels in every master's slots, hears exactly the releases published
// the way it listens (Auto both, Sharded SPUBLISH only, Classic PUBLISH
// only), over one classic connection and one sharded connection per
// master; the publish argument of the release scripts follows the mode.
func TestClusterPubSubModes(t *testing.T) {
	cl := redistest.SharedCluster(t)
	cc := cl.NewClient(t)
	ctx := context.Background()
	base := redistest.Name(t)
	var channels []string
	for _, m := range cl.Masters(t) {
		for _, r := range cl.SlotRanges(t, m) {
			channels = append(channels, "redisson_lock__channel:{"+redistest.KeyInSlot(base, r[0])+"}",
				"redisson_lock__channel:{"+redistest.KeyInSlot(base, r[1])+"}")
		}
	}
	for _, v := range []struct {
		mode             waiters.Mode
		pub              string
		classic, sharded bool
		conns            int
	}{
		{waiters.Auto, "cs", true, true, 1 + 3},
		{waiters.Sharded, "s", false, true, 3},
		{waiters.Classic, "c", true, false, 1},
	} {
		t.Run(v.mode.String(), func(t *testing.T) {
			h := hubOn(t, cc, v.mode)
			require.Equal(t, v.pub, h.Publish(ctx))
			ws := make(map[string][2]*waiters.Waiter)
			for _, ch := range channels {
				w1, ok := h.Join(ch)
				require.True(t, ok)
				require.True(t, signalled(w1), "confirmed: %s", ch)
				// Auto: signalled at each of its two confirmations.
				var w2 *waiters.Waiter
				require.Eventually(t, func() bool { w2 = h.JoinBehind(ch); return w2 != nil },
					5*time.Second, time.Millisecond, "every subscription of %s confirmed", ch)
				select {
				case <-w1.C:
				default:
				}
				ws[ch] = [2]*waiters.Waiter{w1, w2}
			}
			require.Equal(t, v.conns, h.Stats().Connections)
			for _, ch := range channels {
				w := ws[ch]
				for _, sharded := range []bool{false, true} {
					hears := (sharded && v.sharded) || (!sharded && v.classic)
					if sharded {
						require.NoError(t, cc.SPublish(ctx, ch, "0").Err())
					} else {
						require.NoError(t, cc.Publish(ctx, ch, "0").Err())
					}
					if hears {
						require.True(t, signalled(w[0]), "%s sharded=%v", ch, sharded)
						continue
					}
					// A message it hears, published after: the one it
					// must not hear would have arrived first on a sharded
					// connection; on two connections, allow it a moment.
					require.NoError(t, publishHeard(ctx, cc, ch, v.sharded))
					require.True(t, signalled(w[0]), "%s", ch)
					require.True(t, quietFor(w[1], 100*time.Millisecond), "%s: heard a %v message in mode %v", ch, sharded, v.mode)
				}
				w[0].Leave()
				w[1].Leave()
			}
		})
	}
}

func publishHeard(ctx context.Context, cc *redis.ClusterClient, ch string, sharded bool) error {
	if sharded {
		return cc.SPublish(ctx, ch, "0").Err()
	}
	return cc.Publish(ctx, ch, "0").Err()
}

// TestClusterShardedResubscribe: a sharded waiter stays subscribed across
// a slot migration (the old master ends the subscription; the hub
// subscribes at the new one) and across a failover of its master (the
// connection fails; the hub subscribes at the promoted replica): after
// each, the waiter is signalled once the new subscription is confirmed,
// and a release published at the slot's new master wakes it.
func TestClusterShardedResubscribe(t *testing.T) {
	cl := redistest.StartCluster(t) // slots are moved, masters killed
	cc := cl.NewClient(t)
	ctx := context.Background()
	h := hubOn(t, cc, waiters.Sharded)
	masters := cl.Masters(t)
	slot := cl.SlotRanges(t, masters[0])[0][0]
	ch := "redisson_lock__channel:{" + redistest.KeyInSlot(redistest.Name(t), slot) + "}"
	w, ok := h.Join(ch)
	require.True(t, ok)
	defer w.Leave()
	require.True(t, signalled(w))
	wake := func(why string) {
		t.Helper()
		// Publish until heard: the publisher's slot map may lag, and a
		// publish at a node that no longer serves the slot reaches nobody.
		require.Eventually(t, func() bool {
			if err := cc.SPublish(ctx, ch, "0").Err(); err != nil {
				return false
			}
			select {
			case <-w.C:
				return true
			case <-time.After(50 * time.Millisecond):
				return false
			}
		}, redistest.FailoverTimeout, time.Millisecond, why)
	}
	wake("before")

	cl.MigrateSlot(t, slot, masters[1])
	require.True(t, signalledWithin(w, 20*time.Second), "resubscribed after the slot moved")
	cl.Reroute(t, cc)
	wake("after the slot moved")
	require.Equal(t, 1, h.Stats().Connections, "one connection: the old master's closed")

	masters[1].Kill()
	cl.WaitFailover(t, masters[1], slot)
	require.True(t, signalledWithin(w, 20*time.Second), "resubscribed after the failover")
	cl.Reroute(t, cc)
	wake("after the failover")
}

func signalledWithin(w *waiters.Waiter, d time.Duration) bool {
	select {
	case <-w.C:
		return true
	case <-time.After(d):
		return false
	}
}
