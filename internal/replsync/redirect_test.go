package replsync_test

import (
	"context"
	"github.com/rlock-go/rlock/internal/base"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/lua"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/internal/replsync"
)

// scriptHook calls seen with every script command (EVALSHA, EVAL) that a
// node client has run, after it ran.
type scriptHook struct{ seen func(redis.Cmder) }

func (h scriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h scriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.see(cmd)
		return err
	}
}

func (h scriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			h.see(cmd)
		}
		return err
	}
}

func (h scriptHook) see(cmd redis.Cmder) {
	if n := cmd.Name(); n == "evalsha" || n == "eval" {
		h.seen(cmd)
	}
}

// hooked returns a ClusterClient option that installs h on every node
// client it creates.
func hooked(h scriptHook) func(*redis.ClusterOptions) {
	return func(o *redis.ClusterOptions) {
		o.NewClient = func(opt *redis.Options) *redis.Client {
			c := redis.NewClient(opt)
			c.AddHook(h)
			return c
		}
	}
}

// otherMaster returns a master of c other than the one at addr.
func otherMaster(t *testing.T, c *redistest.Cluster, addr string) *redistest.Server {
	t.Helper()
	for _, m := range c.Masters(t) {
		if m.Addr() != addr {
			return m
		}
	}
	t.Fatal("no other master")
	return nil
}

// TestReplicaSyncFollowsRedirects is defect 6 of issue 12 at the Syncer:
// after a slot migration the script and WAIT went to the old master, which
// answers MOVED, and Run returned that error (for every call until the
// ClusterClient happened to reload its slot map); mid-migration, ASK and
// TRYAGAIN were returned too. Run must follow them as the ClusterClient
// does, within its MaxRedirects, and reload the slot map.
func TestReplicaSyncFollowsRedirects(t *testing.T) {
	c := redistest.StartCluster(t) // slots are migrated: a cluster of its own
	ctx := context.Background()

	t.Run("MOVED", func(t *testing.T) {
		cc := c.NewClient(t)
		s := newSyncer(t, cc)
		name := redistest.Name(t)
		slot := base.Slot(name)
		from := c.MasterFor(t, slot)
		n, _ := acquire(t, s, name, "c:1", 0) // the client learns the slot map
		require.Equal(t, int64(1), n)
		release(t, cc, name, "c:1")
		to := otherMaster(t, c, from.Addr())
		c.MigrateSlot(t, slot, to)

		n, res := acquire(t, s, name, "c:2", 0)
		require.Equal(t, int64(1), n)
		require.Equal(t, replsync.Result{Replicas: 1, Acked: 1, Waited: true}, res, "WAIT ran on the new master")
		require.Equal(t, "1", hget(t, to.NewClient(t), name, "c:2"), "the script ran on the new master")
		m, err := s.Master(ctx, name)
		require.NoError(t, err)
		require.Equal(t, to.Addr(), m.Options().Addr, "the slot map was reloaded")
		release(t, cc, name, "c:2")
	})

	t.Run("ASK", func(t *testing.T) {
		cc := c.NewClient(t)
		s := newSyncer(t, cc)
		name := redistest.Name(t)
		slot := base.Slot(name)
		from := c.MasterFor(t, slot)
		_, err := s.Replicas(ctx, name) // the client learns the slot map
		require.NoError(t, err)
		to := otherMaster(t, c, from.Addr())
		// The new master has not run the script yet: ASKING, then the
		// NOSCRIPT fallback.
		require.NoError(t, to.NewClient(t).ScriptFlush(ctx).Err())
		mig := c.StartMigration(t, slot, to)
		mig.MoveKeys(t)

		// The old master does not have the key: ASK, and the new master
		// serves it after ASKING.
		n, res := acquire(t, s, name, "c:1", 0)
		require.Equal(t, int64(1), n)
		require.Equal(t, replsync.Result{Replicas: 1, Acked: 1, Waited: true}, res)
		dst := to.NewClient(t)
		pipe := dst.Pipeline()
		pipe.Do(ctx, "asking")
		held := pipe.HGet(ctx, name, "c:1")
		_, err = pipe.Exec(ctx)
		require.NoError(t, err)
		require.Equal(t, "1", held.Val(), "the script ran on the new master")
		n, _ = acquire(t, s, name, "c:2", 0)
		require.Zero(t, n, "another owner is excluded, on the new master")
		m, err := s.Master(ctx, name)
		require.NoError(t, err)
		require.Equal(t, from.Addr(), m.Options().Addr, "an ASK does not change the slot map")
		mig.Finish(t)
		release(t, cc, name, "c:1")
	})

	t.Run("TRYAGAIN", func(t *testing.T) {
		tryAgain := make(chan struct{}, 1)
		cc := c.NewClient(t, hooked(scriptHook{seen: func(cmd redis.Cmder) {
			if redis.HasErrorPrefix(cmd.Err(), "TRYAGAIN") {
				select {
				case tryAgain <- struct{}{}:
				default:
				}
			}
		}}), func(o *redis.ClusterOptions) {
			o.MaxRedirects = 10000 // keep trying until the migration ends
			o.MinRetryBackoff, o.MaxRetryBackoff = time.Millisecond, 5*time.Millisecond
		})
		s := newSyncer(t, cc)
		name := redistest.Name(t)
		keys := []string{name, base.DerivedKey(base.TokenPrefix, name)}
		slot := base.Slot(name)
		from := c.MasterFor(t, slot)
		_, err := s.Replicas(ctx, name)
		require.NoError(t, err)
		mig := c.StartMigration(t, slot, otherMaster(t, c, from.Addr()))

		// Neither key exists: the old master sends the client on (ASK),
		// the new one cannot run a multi-key script on keys it does not
		// all have: TRYAGAIN, until the migration ends.
		type result struct {
			reply []int64
			res   replsync.Result
			err   error
		}
		done := make(chan result, 1)
		go func() {
			cmd, res, err := s.Run(ctx, lua.Lock, keys, lease.Milliseconds(), "c:1", 0, "1")
			var reply []int64
			if err == nil {
				reply, err = lua.AcquireReply(cmd)
			}
			done <- result{reply, res, err}
		}()
		select {
		case <-tryAgain:
		case r := <-done:
			t.Fatalf("Run returned before any TRYAGAIN: %v %v", r.reply, r.err)
		case <-time.After(30 * time.Second):
			t.Fatal("no TRYAGAIN")
		}
		mig.Finish(t)
		r := <-done
		require.NoError(t, r.err)
		require.Equal(t, int64(1), r.reply[0], "acquired once the migration ended: %v", r.reply)
		require.Equal(t, 1, r.res.Acked)
		release(t, cc, name, "c:1")
	})

	t.Run("bounded by MaxRedirects", func(t *testing.T) {
		var sent atomic.Int64
		cc := c.NewClient(t, hooked(scriptHook{seen: func(redis.Cmder) { sent.Add(1) }}), func(o *redis.ClusterOptions) {
			o.MaxRedirects = 2
			o.MinRetryBackoff, o.MaxRetryBackoff = time.Millisecond, 5*time.Millisecond
		})
		s := newSyncer(t, cc)
		name := redistest.Name(t)
		keys := []string{name, base.DerivedKey(base.TokenPrefix, name)}
		slot := base.Slot(name)
		from := c.MasterFor(t, slot)
		_, err := s.Replicas(ctx, name)
		require.NoError(t, err)
		// Loaded into every node's cache first, so that each send below is
		// one command (no NOSCRIPT fallback).
		require.NoError(t, cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			return lua.Lock.Load(ctx, m).Err()
		}))
		mig := c.StartMigration(t, slot, otherMaster(t, c, from.Addr()))
		defer mig.Finish(t)

		before := sent.Load()
		_, _, err = s.Run(ctx, lua.Lock, keys, lease.Milliseconds(), "c:1", 0, "1")
		require.Error(t, err)
		require.True(t, redis.HasErrorPrefix(err, "ASK") || redis.HasErrorPrefix(err, "TRYAGAIN"), "%v", err)
		require.Equal(t, int64(3), sent.Load()-before, "the first send and MaxRedirects (2) more")
	})
}
