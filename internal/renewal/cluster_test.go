package renewal_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/internal/renewal"
)

// holdOn writes a lock hash through any client (a ClusterClient routes it).
func holdOn(t *testing.T, rdb redis.Cmdable, key, field string, lease time.Duration) {
	t.Helper()
	require.NoError(t, rdb.HSet(context.Background(), key, field, 1).Err())
	require.NoError(t, rdb.PExpire(context.Background(), key, lease).Err())
}

// On a cluster, a tick is one round trip per master: script calls are per
// slot (locks that share a hash tag go in one call), and each master's
// calls go out in one pipeline.
func TestClusterOneRoundTripPerNode(t *testing.T) {
	c := redistest.SharedCluster(t)
	cc := c.NewClient(t)
	calls := &redistest.ScriptCalls{}
	cc.OnNewNode(func(n *redis.Client) { n.AddHook(calls) })
	const lease = 5 * time.Second
	s := newScheduler(t, cc, renewal.WithLease(lease), renewal.WithInterval(300*time.Millisecond))
	stem := redistest.Name(t)
	lost := make(lossLog, 100)
	var keys []string
	// Three slots, one on each master...
	for _, m := range c.Masters(t) {
		keys = append(keys, redistest.KeyInSlot(stem, c.SlotRanges(t, m)[0][0]))
	}
	// ...and 20 locks sharing a fourth slot through a hash tag.
	for i := range 20 {
		keys = append(keys, fmt.Sprintf("{%s}:%d", stem, i))
	}
	for _, k := range keys {
		holdOn(t, cc, k, "c:1", lease)
		s.Add(k, "c:1", time.Now(), lost.report)
	}
	require.Eventually(t, func() bool { return s.Stats().Renewed >= uint64(len(keys)) }, 10*time.Second, time.Millisecond)
	from, fromCalls := s.Stats(), calls.N()
	require.Eventually(t, func() bool { return s.Stats().Ticks >= from.Ticks+3 }, 10*time.Second, time.Millisecond)
	st, sent := s.Stats(), calls.N()-fromCalls
	require.Zero(t, st.Errors)
	require.Zero(t, st.Lost)
	// Three masters: three round trips per tick (unless a slow machine
	// made a round time out and be retried); four slots: four script calls
	// (a round may be in flight at either snapshot).
	ticks := st.Ticks - from.Ticks
	if st.Timeouts == from.Timeouts {
		require.InDelta(t, 3*ticks, st.RoundTrips-from.RoundTrips, 3)
		require.InDelta(t, 4*ticks, sent, 4)
	}
	require.Less(t, st.RoundTrips-from.RoundTrips, uint64(sent), "fewer round trips than script calls")
	for _, k := range keys {
		ttl, err := cc.PTTL(context.Background(), k).Result()
		require.NoError(t, err)
		require.Greater(t, ttl, lease-time.Second, "%s renewed", k)
	}
	require.Len(t, lost, 0)
}

// A master is killed and its replica promoted while the watchdog renews
// locks on every master. Renewal follows the failover on its own (no help
// from the test to reroute the client) through the promoted replica's
// empty script cache (NOSCRIPT, then EVAL), well before the leases run
// out; a lock whose write did not survive the failover (deleted on the
// promoted master here, as if never replicated) is reported lost.
func TestClusterRenewalSurvivesFailover(t *testing.T) {
	c := redistest.StartCluster(t)
	cc := c.NewClient(t)
	ctx := context.Background()
	// The lease outlasts the failover (~5 s) with room to spare on a
	// loaded machine; renewal is tried every 300 ms.
	const lease = 20 * time.Second
	s := newScheduler(t, cc, renewal.WithLease(lease), renewal.WithInterval(300*time.Millisecond))

	stem := redistest.Name(t)
	masters := c.Masters(t)
	victim := masters[0]
	slot := c.SlotRanges(t, victim)[0][0]
	kept := redistest.KeyInSlot(stem+"-kept", slot)
	gone := redistest.KeyInSlot(stem+"-gone", slot)
	others := []string{
		redistest.KeyInSlot(stem, c.SlotRanges(t, masters[1])[0][0]),
		redistest.KeyInSlot(stem, c.SlotRanges(t, masters[2])[0][0]),
	}
	lost := make(chan string, 10)
	for _, k := range append([]string{kept, gone}, others...) {
		holdOn(t, cc, k, "c:1", lease)
		s.Add(k, "c:1", time.Now(), func(err error) {
			if errors.Is(err, rlock.ErrLockLost) {
				lost <- k
			} else {
				lost <- k + ": " + err.Error()
			}
		})
	}
	victim.WaitReplicasCaughtUp(t)

	killed := time.Now()
	victim.Kill()
	promoted := c.WaitFailover(t, victim, slot)
	pc := promoted.NewClient(t)
	require.NoError(t, pc.Del(ctx, gone).Err())

	select {
	case k := <-lost:
		require.Equal(t, gone, k, "the lock whose write was lost is reported, and only it")
	case <-time.After(lease):
		t.Fatal("the lock whose write was lost was not reported")
	}
	// The survivor's lease is renewed on the promoted master: its TTL
	// goes back up to nearly a full lease.
	require.Eventually(t, func() bool {
		ttl, err := pc.PTTL(ctx, kept).Result()
		return err == nil && ttl > lease-time.Since(killed)+time.Second
	}, lease/2, 10*time.Millisecond, "renewed after the failover")
	stats := redistest.CommandStats(t, pc)
	// A replica applies a script's effects, not the script: an EVAL in
	// the promoted node's stats is the NOSCRIPT fallback of a renewal.
	require.Positive(t, stats["eval"], "the empty script cache was refilled by EVAL: %v", stats)
	for _, k := range others {
		ttl, err := cc.PTTL(ctx, k).Result()
		require.NoError(t, err)
		require.Greater(t, ttl, lease-2*time.Second, "%s renewed throughout", k)
	}
	require.Len(t, lost, 0, "nothing else was reported lost")
	require.Equal(t, 3, s.Stats().Registered)
}

// migrateSlot moves slot and its keys from src to dst, the way redis-cli
// --cluster reshard does.
func migrateSlot(t *testing.T, c *redistest.Cluster, slot int, src, dst *redistest.Server) {
	t.Helper()
	ctx := context.Background()
	sc, dc := src.NewClient(t), dst.NewClient(t)
	srcID, err := sc.Do(ctx, "CLUSTER", "MYID").Text()
	require.NoError(t, err)
	dstID, err := dc.Do(ctx, "CLUSTER", "MYID").Text()
	require.NoError(t, err)
	require.NoError(t, dc.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID).Err())
	require.NoError(t, sc.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID).Err())
	keys, err := sc.ClusterGetKeysInSlot(ctx, slot, 1000).Result()
	require.NoError(t, err)
	host, port, err := net.SplitHostPort(dst.Addr())
	require.NoError(t, err)
	args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
	for _, k := range keys {
		args = append(args, k)
	}
	require.NoError(t, sc.Do(ctx, args...).Err())
	for _, m := range c.Masters(t) {
		require.NoError(t, m.NewClient(t).Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())
	}
}

// A slot moves to another master while its locks are renewed: the renewal
// pipeline, sent straight to the old master, is answered MOVED; those calls
// go again through the ClusterClient, which follows the redirection, and
// the locks are renewed all along.
func TestClusterRenewalFollowsSlotMigration(t *testing.T) {
	c := redistest.StartCluster(t)
	cc := c.NewClient(t)
	ctx := context.Background()
	const lease = 3 * time.Second
	s := newScheduler(t, cc, renewal.WithLease(lease), renewal.WithInterval(200*time.Millisecond))
	masters := c.Masters(t)
	src, dst := masters[0], masters[1]
	slot := c.SlotRanges(t, src)[0][0]
	stem := redistest.Name(t)
	var keys []string
	for i := range 5 {
		keys = append(keys, redistest.KeyInSlot(fmt.Sprintf("%s-%d", stem, i), slot))
	}
	lost := make(chan string, len(keys))
	for _, k := range keys {
		holdOn(t, cc, k, "c:1", lease)
		s.Add(k, "c:1", time.Now(), func(err error) { lost <- k + ": " + err.Error() })
	}
	require.Eventually(t, func() bool { return s.Stats().Renewed >= uint64(len(keys)) }, 10*time.Second, time.Millisecond)

	migrateSlot(t, c, slot, src, dst)
	moved := time.Now()
	dc := dst.NewClient(t)
	// Two leases after the move, the keys are on dst and still renewed.
	for time.Since(moved) < 2*lease {
		select {
		case msg := <-lost:
			t.Fatalf("lost after the slot moved: %s", msg)
		case <-time.After(100 * time.Millisecond):
		}
	}
	for _, k := range keys {
		ttl, err := dc.PTTL(ctx, k).Result()
		require.NoError(t, err)
		require.Greater(t, ttl, lease-time.Second, "%s renewed on the new master", k)
	}
	require.Zero(t, s.Stats().Lost)
}
