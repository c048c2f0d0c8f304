package replsync_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/lua"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/internal/replsync"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(redistest.StopSharedAfter(m))
}

const lease = time.Minute

func newSyncer(t *testing.T, rdb any, opts ...replsync.Option) *replsync.Syncer {
	t.Helper()
	s, err := replsync.New(rdb, opts...)
	require.NoError(t, err)
	return s
}

// acquire runs the reentrant acquire script for owner through s and
// returns the hold count it reports (0: held by another owner).
func acquire(t *testing.T, s *replsync.Syncer, name, owner string, count int) (int64, replsync.Result) {
	t.Helper()
	cmd, res, err := s.Run(context.Background(), lua.Lock, []string{name}, lease.Milliseconds(), owner, count)
	require.NoError(t, err)
	reply, err := lua.AcquireReply(cmd)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(reply), 2)
	if reply[0] == 0 {
		return 0, res
	}
	return reply[1], res
}

// release runs the reentrant release script for owner (last hold) through
// rdb with plain Script.Run.
func release(t *testing.T, rdb redis.Scripter, name, owner string) {
	t.Helper()
	keys := []string{name, base.Channel(name), base.DerivedKey(base.LatchPrefix, name) + ":r-" + owner}
	reply, err := lua.ReleaseReply(lua.Unlock.Run(context.Background(), rdb, keys, lease.Milliseconds(), owner, 1, base.UnlockMessage, 10000))
	require.NoError(t, err)
	require.Equal(t, []int64{1, 0}, reply, "released")
}

func hget(t *testing.T, rdb redis.Cmdable, name, field string) string {
	t.Helper()
	v, err := rdb.HGet(context.Background(), name, field).Result()
	if errors.Is(err, redis.Nil) {
		return ""
	}
	require.NoError(t, err)
	return v
}

func TestBadInput(t *testing.T) {
	_, err := replsync.New(nil)
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	_, err = replsync.New((*redis.Client)(nil))
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	_, err = replsync.New((*redis.ClusterClient)(nil))
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	_, err = replsync.New(ring)
	require.ErrorIs(t, err, replsync.ErrUnsupportedClient)
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: 500 * time.Millisecond})
	defer rdb.Close()
	_, err = replsync.New(rdb, replsync.WithTimeout(0))
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	_, err = replsync.New(rdb, replsync.WithRefresh(0))
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)

	s := newSyncer(t, rdb, nil, replsync.WithTimeout(500*time.Millisecond))
	require.Equal(t, 500*time.Millisecond, s.Timeout())
	_, _, err = s.Run(context.Background(), lua.Lock, nil)
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	// WAIT's reply is read with the client's ReadTimeout: it must be longer.
	_, _, err = s.Run(context.Background(), lua.Lock, []string{"k"}, 1, "o", 0)
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
}

// Without replicas nothing is waited on: a standalone server, and
// miniredis, which refuses INFO replication.
func TestNoReplicas(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rdb := b.NewClient(t)
		s := newSyncer(t, rdb)
		name := redistest.Name(t)
		n, res := acquire(t, s, name, "c:1", 0)
		require.Equal(t, int64(1), n)
		require.Equal(t, replsync.Result{}, res)
		require.False(t, res.Unsynced())
		got, err := s.Replicas(context.Background(), name)
		require.NoError(t, err)
		require.Zero(t, got)
		release(t, rdb, name, "c:1")
	})
}

func TestReplicaAcknowledges(t *testing.T) {
	r := redistest.StartReplicated(t)
	rdb := r.Master.NewClient(t)
	s := newSyncer(t, rdb)
	name := redistest.Name(t)

	n, res := acquire(t, s, name, "c:1", 0)
	require.Equal(t, int64(1), n)
	require.Equal(t, replsync.Result{Replicas: 1, Acked: 1, Waited: true}, res)
	require.False(t, res.Unsynced())
	// Acknowledged means the replica has it now.
	require.Equal(t, "1", hget(t, r.Replica.NewClient(t), name, "c:1"))

	// Re-entry through the sync path counts once.
	n, res = acquire(t, s, name, "c:1", 1)
	require.Equal(t, int64(2), n)
	require.Equal(t, 1, res.Acked)
}

// A frozen replica acknowledges nothing within the timeout while the
// master still counts it as connected: the rollback case.
func TestFrozenReplicaAcknowledgesNothing(t *testing.T) {
	r := redistest.StartReplicated(t)
	rdb := r.Master.NewClient(t)
	s := newSyncer(t, rdb, replsync.WithTimeout(200*time.Millisecond))
	name := redistest.Name(t)
	_, err := s.Replicas(context.Background(), name) // warm the count
	require.NoError(t, err)

	r.Replica.Freeze()
	t.Cleanup(r.Replica.Thaw)
	n, res := acquire(t, s, name, "c:1", 0)
	require.Equal(t, int64(1), n, "the script ran on the master")
	require.Equal(t, replsync.Result{Replicas: 1, Acked: 0, Waited: true}, res)
	require.True(t, res.Unsynced(), "0 of 1 acknowledged: the caller rolls back")
	release(t, rdb, name, "c:1") // the caller's rollback
}

// What replica sync protects against, shown deterministically: the
// replication link is cut (the replica's connection goes through a proxy
// that now drops everything), a lock is taken, the master dies and the
// replica is promoted. Without sync the caller was told "acquired" and the
// lock is gone after the failover (another owner can take it: two
// holders). With sync the caller learns that no replica has it.
func TestUnsyncedLockIsLostOnFailover(t *testing.T) {
	r := redistest.StartReplicated(t)
	ctx := context.Background()
	rdb := r.Master.NewClient(t)
	s := newSyncer(t, rdb, replsync.WithTimeout(200*time.Millisecond))
	plain, synced := redistest.Name(t), redistest.Name(t)
	_, err := s.Replicas(ctx, plain)
	require.NoError(t, err)

	r.Link.Blackhole(true)
	reply, err := lua.AcquireReply(lua.Lock.Run(ctx, rdb, []string{plain}, lease.Milliseconds(), "c:1", 0))
	require.NoError(t, err)
	require.Equal(t, []int64{1, 1, 0}, reply, "acquired, as far as the master knows")
	_, res := acquire(t, s, synced, "c:1", 0)
	require.True(t, res.Unsynced(), "with sync the caller is told: %+v", res)

	r.Master.Kill()
	r.Promote(t)
	promoted := r.Replica.NewClient(t)
	require.Equal(t, "", hget(t, promoted, plain, "c:1"), "the unsynced lock did not survive the failover")
	reply, err = lua.AcquireReply(lua.Lock.Run(ctx, promoted, []string{plain}, lease.Milliseconds(), "c:2", 0))
	require.NoError(t, err)
	require.Equal(t, []int64{1, 1, 0}, reply, "another owner takes it: two holders believe they hold it")
}

// After SCRIPT FLUSH (what a promoted replica looks like) the pipelined
// EVALSHA gets NOSCRIPT and Run falls back to EVAL: the script runs once.
func TestNoScriptFallback(t *testing.T) {
	r := redistest.StartReplicated(t)
	ctx := context.Background()
	rdb := r.Master.NewClient(t)
	s := newSyncer(t, rdb)
	name := redistest.Name(t)
	require.NoError(t, rdb.ScriptFlush(ctx).Err())
	n, res := acquire(t, s, name, "c:1", 0)
	require.Equal(t, int64(1), n)
	require.Equal(t, 1, res.Acked)
	require.Equal(t, "1", hget(t, rdb, name, "c:1"), "ran once")
	ok, err := lua.Lock.Exists(ctx, rdb).Result()
	require.NoError(t, err)
	require.Equal(t, []bool{true}, ok, "EVAL cached it")
}

// On a cluster the script and WAIT go to the master of the key's slot, for
// names in every master's slot range.
func TestCluster(t *testing.T) {
	c := redistest.SharedCluster(t)
	cc := c.NewClient(t)
	s := newSyncer(t, cc)
	ctx := context.Background()
	for _, m := range c.Masters(t) {
		for _, r := range c.SlotRanges(t, m) {
			for _, slot := range []int{r[0], (r[0] + r[1]) / 2, r[1]} {
				name := redistest.KeyInSlot(redistest.Name(t), slot)
				got, err := s.Master(ctx, name)
				require.NoError(t, err)
				require.Equal(t, m.Addr(), got.Options().Addr)
				n, res := acquire(t, s, name, "c:1", 0)
				require.Equal(t, int64(1), n)
				require.Equal(t, replsync.Result{Replicas: 1, Acked: 1, Waited: true}, res, name)
				// A user hash tag puts derived keys in the same slot.
				tagged := "{" + name + "}:sub"
				n, res = acquire(t, s, tagged, "c:1", 0)
				require.Equal(t, int64(1), n)
				require.Equal(t, 1, res.Acked)
				release(t, cc, name, "c:1")
				release(t, cc, tagged, "c:1")
			}
		}
	}
}

// The failover test: a master killed with SIGKILL right after an
// acquisition with replica sync. After its replica is promoted the lock is
// still held by the same owner, and the holder can release it (through the
// promoted master's empty script cache: the NOSCRIPT path).
func TestSyncedLockSurvivesClusterFailover(t *testing.T) {
	c := redistest.StartCluster(t)
	cc := c.NewClient(t)
	s := newSyncer(t, cc)
	ctx := context.Background()
	name := redistest.Name(t)
	slot := base.Slot(name)
	master := c.MasterFor(t, slot)

	n, res := acquire(t, s, name, "c:1", 0)
	require.Equal(t, int64(1), n)
	require.False(t, res.Unsynced())
	require.Equal(t, 1, res.Acked)
	master.Kill()

	promoted := c.WaitFailover(t, master, slot)
	// Another owner tries, as a user would, until the client has found the
	// promoted master (Run makes the ClusterClient reload its slot map
	// after a connection error; the test does not reroute it): it is still
	// excluded.
	deadline := time.Now().Add(15 * time.Second)
	var cmd *redis.Cmd
	var err error
	for {
		cmd, _, err = s.Run(ctx, lua.Lock, []string{name}, lease.Milliseconds(), "c:2", 0)
		if err == nil || time.Now().After(deadline) {
			break
		}
		t.Logf("retrying after %v", err)
	}
	require.NoError(t, err, "Run reaches the promoted master")
	reply, err := lua.AcquireReply(cmd)
	require.NoError(t, err)
	require.Equal(t, int64(0), reply[0], "another owner is excluded")
	require.Greater(t, reply[1], int64(0), "the lease survived too")
	require.Equal(t, "1", hget(t, cc, name, "c:1"), "same owner after the failover")
	// The promoted master has no replica now: nothing to wait for.
	got, err := s.Replicas(ctx, name)
	require.NoError(t, err)
	require.Zero(t, got)
	pm, err := s.Master(ctx, name)
	require.NoError(t, err)
	require.Equal(t, promoted.Addr(), pm.Options().Addr)
	release(t, cc, name, "c:1")
	require.Equal(t, "", hget(t, cc, name, "c:1"))
}

// Regression (CI): after a failover, Run asked the dead master for its
// replica count (the cached count had expired), failed with a connection
// error, and returned before reloading the cluster client's slot map, so
// every later Run went to the dead master again until go-redis reloaded
// the map on its own schedule. A failed replica count now reloads it as a
// failed script does. go-redis's own reload is pushed out of reach here,
// and the count is never cached.
func TestRunStuckAskingDeadMasterForReplicas(t *testing.T) {
	c := redistest.StartCluster(t)
	cc := c.NewClient(t, func(o *redis.ClusterOptions) { o.ClusterStateReloadInterval = time.Hour })
	s := newSyncer(t, cc, replsync.WithRefresh(time.Nanosecond))
	name := redistest.Name(t)
	slot := base.Slot(name)
	master := c.MasterFor(t, slot)
	n, _ := acquire(t, s, name, "c:1", 0)
	require.Equal(t, int64(1), n)
	master.Kill()
	promoted := c.WaitFailover(t, master, slot)

	require.Eventually(t, func() bool {
		_, _, err := s.Run(context.Background(), lua.Lock, []string{name}, lease.Milliseconds(), "c:2", 0)
		return err == nil
	}, redistest.FailoverTimeout/2, 10*time.Millisecond, "Run reaches the promoted master")
	pm, err := s.Master(context.Background(), name)
	require.NoError(t, err)
	require.Equal(t, promoted.Addr(), pm.Options().Addr)
	require.Equal(t, "1", hget(t, cc, name, "c:1"), "same owner after the failover")
}

// With Sentinel, through go-redis's failover client (a *redis.Client).
func TestSyncedLockSurvivesSentinelFailover(t *testing.T) {
	st := redistest.StartSentinel(t)
	fc := st.NewFailoverClient(t)
	s := newSyncer(t, fc)
	name := redistest.Name(t)

	n, res := acquire(t, s, name, "c:1", 0)
	require.Equal(t, int64(1), n)
	require.Equal(t, replsync.Result{Replicas: 1, Acked: 1, Waited: true}, res)
	st.Master.Kill()
	st.WaitFailover(t, st.Master)

	require.Eventually(t, func() bool {
		v, err := fc.HGet(context.Background(), name, "c:1").Result()
		return err == nil && v == "1"
	}, redistest.FailoverTimeout, 10*time.Millisecond, "same owner after the failover")
	n, _ = acquire(t, s, name, "c:2", 0)
	require.Zero(t, n)
	release(t, fc, name, "c:1")
}

func TestTimeoutFor(t *testing.T) {
	for rt, want := range map[time.Duration]time.Duration{
		-1:                      replsync.DefaultTimeout, // no read timeout
		0:                       replsync.DefaultTimeout,
		5 * time.Second:         replsync.DefaultTimeout, // go-redis' default
		2 * time.Second:         replsync.DefaultTimeout,
		time.Second:             500 * time.Millisecond,
		200 * time.Millisecond:  100 * time.Millisecond, // the README's RedLock advice
		3 * time.Millisecond:    time.Millisecond,
		2 * time.Millisecond:    time.Millisecond,
		1999 * time.Microsecond: 0, // no WAIT timeout fits
		time.Millisecond:        0,
	} {
		require.Equal(t, want, replsync.TimeoutFor(rt), "ReadTimeout %v", rt)
	}
}
