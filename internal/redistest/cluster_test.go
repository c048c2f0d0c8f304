package redistest

import (
	"context"
	"github.com/rlock-go/rlock/internal/base"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func TestParseClusterNodes(t *testing.T) {
	noLeaks(t)
	text := "07c3 127.0.0.1:30004@31004 slave e7d1 0 1426238317239 4 connected\n" +
		"e7d1 127.0.0.1:30001@31001 myself,master - 0 0 1 connected 0-5460 6000 [93->-292f]\n" +
		"aaaa 127.0.0.1:30002@31002 master,fail - 0 0 2 disconnected\n"
	nodes, err := parseClusterNodes(text)
	require.NoError(t, err)
	require.Equal(t, []ClusterNode{
		{ID: "07c3", Addr: "127.0.0.1:30004", MasterID: "e7d1"},
		{ID: "e7d1", Addr: "127.0.0.1:30001", Master: true, Slots: [][2]int{{0, 5460}, {6000, 6000}}},
		{ID: "aaaa", Addr: "127.0.0.1:30002", Master: true, Failed: true},
	}, nodes)
	_, err = parseClusterNodes("garbage")
	require.Error(t, err)
}

func TestClusterFailover(t *testing.T) {
	noLeaks(t)
	c := StartCluster(t)
	ctx := context.Background()
	ms := c.Masters(t)
	require.Len(t, ms, 3)
	require.Equal(t, 0, c.SlotRanges(t, ms[0])[0][0])
	cc := c.NewClient(t)
	require.NoError(t, cc.Set(ctx, "{a}x", "1", 0).Err())

	// Kill the master of slot 0; its replica takes over.
	m := c.MasterFor(t, 0)
	r := c.ReplicaOf(t, m)
	require.NotNil(t, r)
	m.Kill()
	got := c.WaitFailover(t, m, 0)
	require.Equal(t, r.Addr(), got.Addr())
	require.Equal(t, got.Addr(), c.MasterFor(t, 0).Addr())
	c.Reroute(t, cc)
	require.Equal(t, "1", cc.Get(ctx, "{a}x").Val())
	require.NoError(t, cc.Set(ctx, "{b}y", "2", 0).Err())
}

func TestSharedCluster(t *testing.T) {
	noLeaks(t)
	t.Cleanup(StopShared) // this package's TestMain does not stop it
	a := SharedCluster(t)
	require.Same(t, a, SharedCluster(t))
	cc := a.NewClient(t)
	require.NoError(t, cc.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
		return m.Ping(ctx).Err()
	}))
}

func TestReplicated(t *testing.T) {
	noLeaks(t)
	r := StartReplicated(t)
	ctx := context.Background()
	m := r.Master.NewClient(t)
	require.NoError(t, m.Set(ctx, Name(t), "v", 0).Err())
	n, err := m.Wait(ctx, 1, 0).Result()
	require.NoError(t, err)
	require.Equal(t, int64(1), n)

	r.Master.Kill()
	r.Promote(t)
	info, err := r.Replica.NewClient(t).Info(ctx, "replication").Result()
	require.NoError(t, err)
	require.Equal(t, "master", infoField(info, "role"))
}

func TestSentinelFailover(t *testing.T) {
	noLeaks(t)
	s := StartSentinel(t)
	ctx := context.Background()
	fc := s.NewFailoverClient(t)
	key := Name(t)
	require.NoError(t, fc.Set(ctx, key, "v", 0).Err())
	require.NoError(t, fc.Wait(ctx, 1, 0).Err())
	s.Master.Kill()
	got := s.WaitFailover(t, s.Master)
	require.Equal(t, s.Replica.Addr(), got.Addr())
	require.Eventually(t, func() bool { return fc.Get(ctx, key).Val() == "v" }, FailoverTimeout, 10*time.Millisecond)
}

func TestKeyInSlot(t *testing.T) {
	noLeaks(t)
	for _, slot := range []int{0, 1, 5460, 5461, 16383} {
		k := KeyInSlot("p", slot)
		require.Equal(t, slot, base.Slot(k), k)
	}
}

// A slot moved with MigrateSlot, and one left mid-migration: the old
// master answers ASK for keys it no longer has, the new one serves them
// after ASKING, and once finished the old master answers MOVED while a
// ClusterClient follows it.
func TestClusterMigrateSlot(t *testing.T) {
	noLeaks(t)
	c := StartCluster(t)
	ctx := context.Background()
	cc := c.NewClient(t)
	key := Name(t)
	slot := base.Slot(key)
	require.NoError(t, cc.Set(ctx, key, "v", time.Hour).Err())
	from := c.MasterFor(t, slot)
	var to *Server
	for _, m := range c.Masters(t) {
		if m.Addr() != from.Addr() {
			to = m
			break
		}
	}
	src, dst := from.NewClient(t), to.NewClient(t)

	m := c.StartMigration(t, slot, to)
	require.Equal(t, from.Addr(), m.From())
	require.Equal(t, to.Addr(), m.To())
	require.Equal(t, "v", src.Get(ctx, key).Val(), "the old master still serves a key it has")
	require.Equal(t, 1, m.MoveKeys(t))
	err := src.Get(ctx, key).Err()
	require.True(t, redis.HasErrorPrefix(err, "ASK"), "ASK for a key it no longer has: %v", err)
	require.Contains(t, err.Error(), to.Addr())
	require.True(t, redis.HasErrorPrefix(dst.Get(ctx, key).Err(), "MOVED"), "without ASKING the new master sends the client back")
	pipe := dst.Pipeline()
	pipe.Do(ctx, "asking")
	get := pipe.Get(ctx, key)
	_, err = pipe.Exec(ctx)
	require.NoError(t, err)
	require.Equal(t, "v", get.Val(), "served after ASKING")
	require.Equal(t, from.Addr(), c.MasterFor(t, slot).Addr(), "the slot map names the old master until Finish")

	m.Finish(t)
	require.Equal(t, to.Addr(), c.MasterFor(t, slot).Addr())
	err = src.Get(ctx, key).Err()
	require.True(t, redis.HasErrorPrefix(err, "MOVED"), "MOVED once finished: %v", err)
	require.Equal(t, "v", cc.Get(ctx, key).Val(), "a ClusterClient follows")
	ttl, err := dst.PTTL(ctx, key).Result()
	require.NoError(t, err)
	require.Greater(t, ttl, 59*time.Minute, "MIGRATE kept the TTL")

	// And back, in one call.
	c.MigrateSlot(t, slot, from)
	require.Equal(t, from.Addr(), c.MasterFor(t, slot).Addr())
	require.Equal(t, "v", src.Get(ctx, key).Val())
	c.WaitHealthy(t)
}
