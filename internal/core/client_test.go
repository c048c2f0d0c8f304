package core

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/redistest"
)

// TestReplayWindowCountsClusterRedirects: on a ClusterClient the replay
// window counted MaxRetries only; the cluster's default is none (-1), so the
// window was the 1 s floor, while go-redis sends a command whose reply
// timed out up to MaxRedirects + 1 times (3 re-sends by default, each
// after a read timeout), each of them a node call with its own MaxRetries,
// and the client runs the script again after a connection error. The
// window is computed here from the options as go-redis documents them, so
// that the test fails if the computation drifts.
func TestReplayWindowCountsClusterRedirects(t *testing.T) {
	var pauses time.Duration
	for _, p := range clusterRetries {
		pauses += p
	}
	runs := 1 + len(clusterRetries)
	for _, tc := range []struct {
		name  string
		opt   redis.ClusterOptions
		tries int // MaxRedirects + 1
		sends int // per try: 1 + the node client's MaxRetries
	}{
		{"go-redis defaults", redis.ClusterOptions{}, 4, 1},
		{"no redirects", redis.ClusterOptions{MaxRedirects: -1}, 1, 1},
		{"node retries", redis.ClusterOptions{MaxRetries: 2}, 4, 3},
		{"short timeouts", redis.ClusterOptions{MaxRedirects: 8, MaxRetries: -1, DialTimeout: 100 * time.Millisecond,
			ReadTimeout: 200 * time.Millisecond, WriteTimeout: 50 * time.Millisecond, MaxRetryBackoff: 20 * time.Millisecond}, 9, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opt := tc.opt
			opt.Addrs = []string{"127.0.0.1:1"}
			cc := redis.NewClusterClient(&opt)
			t.Cleanup(func() { _ = cc.Close() })
			o := cc.Options()
			each := o.DialTimeout + o.WriteTimeout + o.ReadTimeout + o.MaxRetryBackoff
			want := time.Duration(runs*tc.tries*tc.sends-1)*each + pauses
			want = min(max(want, time.Second), 5*time.Minute)
			require.Equal(t, want, replayWindow(cc))
		})
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { _ = cc.Close() })
	// 4 runs of 4 tries: 15 re-sends, each after up to 5 s + 5 s + 5 s + 1 s.
	require.Equal(t, 15*16*time.Second+pauses, replayWindow(cc), "go-redis v9.23 defaults")

	// A plain client and a Ring: 1 + MaxRetries sends (3 re-sends by
	// default).
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = c.Close() })
	require.Equal(t, 3*16*time.Second, replayWindow(c))
	r := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}, MaxRetries: 1,
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second, MaxRetryBackoff: time.Second})
	t.Cleanup(func() { _ = r.Close() })
	require.Equal(t, 4*time.Second, replayWindow(r))
}

// spin records each time it runs (RPUSH KEYS[1] ARGV[2]) and then keeps the
// server busy for ARGV[1] ms: longer than the client's ReadTimeout, so
// every send of it times out after it ran, and go-redis sends it again.
var spin = redis.NewScript(`
redis.call('RPUSH', KEYS[1], ARGV[2])
local t = redis.call('TIME')
local start = t[1] * 1000000 + t[2]
repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] - start >= tonumber(ARGV[1]) * 1000
return 1
`)

// TestReplayWindowCoversClusterResends checks replaySends against what
// go-redis really does on a cluster: a script whose every reply times out
// is run by Client.run, and every send that reaches the server is counted.
// More sends than replaySends models would mean the replay window is too
// short.
func TestReplayWindowCoversClusterResends(t *testing.T) {
	c := redistest.StartCluster(t) // its master is kept busy: a cluster of its own
	ctx := context.Background()
	cc := c.NewClient(t, func(o *redis.ClusterOptions) {
		o.MaxRedirects, o.MaxRetries = 1, 1
		o.ReadTimeout, o.WriteTimeout, o.DialTimeout = 100*time.Millisecond, 100*time.Millisecond, time.Second
		o.MinRetryBackoff, o.MaxRetryBackoff = time.Millisecond, 2*time.Millisecond
	})
	cl, err := NewClient(cc, Config{NoReplicaSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cl.Close() })
	require.NoError(t, spin.Load(ctx, cc).Err())
	// go-redis now and then reads a reply after the read timeout (a 150 ms
	// script answered within a 100 ms ReadTimeout): try a few times for a
	// call whose every reply timed out.
	var key string
	for range 5 {
		key = redistest.Name(t)
		start := time.Now()
		err = cl.run(ctx, spin, []string{key}, 150, "sent").Err()
		t.Logf("run took %v: %v", time.Since(start), err)
		if err != nil {
			break
		}
	}
	require.Error(t, err, "every reply timed out")
	// Sends still queued behind a busy script reach it later: count once
	// the count has stopped growing.
	reader := c.NewClient(t)
	n, stable := int64(-1), 0
	require.Eventually(t, func() bool {
		got, err := reader.LLen(ctx, key).Result()
		switch {
		case err != nil:
			return false
		case got == n:
			stable++
		default:
			n, stable = got, 0
		}
		return stable >= 3
	}, 30*time.Second, 200*time.Millisecond)
	modelled, _, _, ok := replaySends(cc)
	require.True(t, ok)
	t.Logf("%d sends reached the server; modelled at most %d", n, modelled)
	require.LessOrEqual(t, n, int64(modelled))
	require.Greater(t, n, int64(2), "more than the 1 + MaxRetries sends the window counted before")
}

// With auto-pipelining, a script call with no other in flight on the
// client goes straight to Redis: the auto-pipeliner hands each command to
// its goroutine and back, two wake-ups a lone caller pays for nothing. A
// call made while another is in flight goes through the auto-pipeliner.
func TestAutoPipelineOnlyWhenCallsOverlap(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.NewClient(t)
		c, err := NewClient(rdb, Config{AutoPipeline: true, NoReplicaSync: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		// A call that goes through the auto-pipeliner fails once it is
		// closed; one that goes straight to Redis does not.
		ap, err := c.pipeliner()
		require.NoError(t, err)
		require.NoError(t, ap.Close())
		s := redis.NewScript(`return 1`)

		require.NoError(t, c.run(ctx, s, []string{"k"}).Err(), "a lone call went through the auto-pipeliner")
		require.Zero(t, c.inFlight.Load())

		c.inFlight.Add(1) // another call in flight
		require.Error(t, c.run(ctx, s, []string{"k"}).Err(), "an overlapping call did not go through the auto-pipeliner")
		c.inFlight.Add(-1)
		require.Zero(t, c.inFlight.Load())
	})
}

// The goroutine that ran a background job waits for the next one: an
// attempt under a ctx that can end hands its work to it rather than start
// a goroutine each time. Close ends it.
func TestBackgroundWorkerIsReused(t *testing.T) {
	b := redistest.Mini(t)
	c, err := NewClient(b.NewClient(t), Config{})
	require.NoError(t, err)
	ran := make(chan struct{}, 2)
	require.True(t, c.goBackground(func() { ran <- struct{}{} }))
	<-ran
	require.Eventually(t, func() bool {
		c.bg.Add(1) // the worker counts the job done
		select {
		case c.work <- func() { ran <- struct{}{} }: // only an idle worker takes it
			return true
		default:
			c.bg.Done()
			return false
		}
	}, 5*time.Second, time.Millisecond, "no idle worker took the next job")
	<-ran
	require.NoError(t, c.Close())
	require.False(t, c.goBackground(func() {}), "background work after Close")
}
