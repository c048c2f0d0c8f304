package reentrant_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/fair"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/reentrant"
)

// TestReplicaSyncUndoesUnreplicatedAcquisition: with the replica frozen
// (SIGSTOP), no replica can acknowledge, so an acquisition is undone: TryLock
// reports ErrNotReplicated and leaves no lock; a waiting Lock keeps trying
// and succeeds once the replica runs again.
func TestReplicaSyncUndoesUnreplicatedAcquisition(t *testing.T) {
	r := redistest.StartReplicated(t)
	ctx := context.Background()
	rdb := r.Master.NewClient(t)
	c := clientOn(t, rdb, rlock.WithReplicaSync(150*time.Millisecond))
	d, on := c.ReplicaSync()
	require.True(t, on)
	require.Equal(t, 150*time.Millisecond, d)
	name := redistest.Name(t)
	l := newLock(t, c, name)
	require.NoError(t, l.Lock(ctx), "the replica acknowledges")
	require.NoError(t, l.Unlock(ctx))

	r.Replica.Freeze()
	require.ErrorIs(t, l.TryLock(ctx), rlock.ErrNotReplicated)
	n, err := rdb.Exists(ctx, name).Result()
	require.NoError(t, err)
	require.Zero(t, n, "the unreplicated acquisition was undone")
	fl := newFair(t, c, name+":fair")
	require.ErrorIs(t, fl.TryLock(ctx), rlock.ErrNotReplicated, "the fair lock too")

	done := make(chan error, 1)
	go func() { done <- l.Lock(ctx) }()
	select {
	case err := <-done:
		t.Fatalf("Lock returned while no replica could acknowledge: %v", err)
	case <-time.After(500 * time.Millisecond): // a few undone attempts
	}
	r.Replica.Thaw()
	require.NoError(t, <-done)
	require.NoError(t, l.Unlock(ctx))

	off := newLock(t, clientOn(t, rdb, rlock.WithoutReplicaSync()), name)
	r.Replica.Freeze()
	defer r.Replica.Thaw()
	require.NoError(t, off.TryLock(ctx), "without replica sync nothing is waited for")
	require.NoError(t, off.Unlock(ctx))
}

func newFair(t *testing.T, c *rlock.Client, name string) *fair.Lock {
	t.Helper()
	l, err := fair.New(c, name)
	require.NoError(t, err)
	return l
}

// TestReplicaSyncedLockSurvivesSentinelFailover: the master is killed right
// after an acquisition with replica sync (on by default); once Sentinel has
// promoted the replica, the same owner still holds the lock, others are
// excluded, and the holder unlocks it through the failover client.
func TestReplicaSyncedLockSurvivesSentinelFailover(t *testing.T) {
	st := redistest.StartSentinel(t)
	ctx := context.Background()
	c := clientOn(t, st.NewFailoverClient(t), shortWatchdog(30*time.Second))
	_, on := c.ReplicaSync()
	require.True(t, on, "on by default")
	name := redistest.Name(t)
	l := newLock(t, c, name, reentrant.WithLease(time.Minute))
	require.NoError(t, l.Lock(ctx))
	st.Master.Kill()
	st.WaitFailover(t, st.Master)

	other := newLock(t, clientOn(t, st.NewFailoverClient(t)), name)
	require.Eventually(t, func() bool {
		n, err := l.HoldCount(ctx)
		return err == nil && n == 1
	}, redistest.FailoverTimeout, 10*time.Millisecond, "same owner after the failover")
	require.ErrorIs(t, other.TryLock(ctx), rlock.ErrNotObtained)
	require.NoError(t, l.Unlock(ctx))
	require.NoError(t, other.TryLock(ctx))
	require.NoError(t, other.Unlock(ctx))
}

// TestReplicaSyncNotSilentlyOffWithShortReadTimeout: replica sync was
// switched off, silently, when the go-redis ReadTimeout was 1 s or less
// (the default WAIT timeout, 1 s, did not fit in it), and the README's
// advice for RedLock nodes (ReadTimeout 200 ms) did exactly that. Now the
// default WAIT timeout is half the ReadTimeout when that is shorter than
// 1 s: replica sync stays on, and an acquisition no replica acknowledges
// is still undone.
func TestReplicaSyncNotSilentlyOffWithShortReadTimeout(t *testing.T) {
	r := redistest.StartReplicated(t)
	ctx := context.Background()
	rdb := r.Master.NewClient(t, func(o *redis.Options) { o.ReadTimeout = 200 * time.Millisecond })
	c := clientOn(t, rdb)
	d, on := c.ReplicaSync()
	require.True(t, on, "replica sync stays on")
	require.Equal(t, 100*time.Millisecond, d, "WAIT gets half the ReadTimeout")
	l := newLock(t, c, redistest.Name(t))
	// A blocking Lock: it tries again if the replica, just started, is
	// slow to acknowledge the first time.
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, l.Lock(lctx), "the replica acknowledges within the read timeout")
	require.NoError(t, l.Unlock(ctx))
	r.Replica.Freeze()
	defer r.Replica.Thaw()
	require.ErrorIs(t, l.TryLock(ctx), rlock.ErrNotReplicated, "and an unacknowledged acquisition is undone")

	// The same on a cluster: 1 s (go-redis' default is 5 s) gives 500 ms.
	cc := redistest.SharedCluster(t).NewClient(t, func(o *redis.ClusterOptions) { o.ReadTimeout = time.Second })
	d, on = clientOn(t, cc).ReplicaSync()
	require.True(t, on)
	require.Equal(t, 500*time.Millisecond, d)

	// An explicit timeout that does not fit is still refused.
	_, err := rlock.NewClient(rdb, rlock.WithReplicaSync(200*time.Millisecond))
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// With a ReadTimeout too short for any WAIT (under 2 ms), replica sync is
// off, and the client says so once, as a warning on its logger.
func TestReplicaSyncOffIsLogged(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	var logs syncBuffer
	c := clientOn(t, rdb, rlock.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	_, on := c.ReplicaSync()
	require.False(t, on)
	require.Contains(t, logs.String(), "level=WARN")
	require.Contains(t, logs.String(), "replica sync is off")
	require.Equal(t, 1, bytes.Count([]byte(logs.String()), []byte("replica sync")), "once")
}
