package renewal_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/internal/renewal"
)

// Issue 12, defect 4: one frozen master (SIGSTOP) among healthy ones. With
// renewal going slot after slot, each of the frozen master's slots cost
// go-redis's ReadTimeout × tries (the per-call timeout is not applied by the
// socket), so the locks on the healthy masters expired unrenewed and were
// reported lost. Renewal is per node and concurrent: the healthy masters'
// locks stay renewed within their lease for as long as the freeze lasts.
func TestFrozenMasterDoesNotStopRenewalOnHealthyMasters(t *testing.T) {
	c := redistest.StartCluster(t)
	cc := c.NewClient(t) // go-redis defaults: 5 s ReadTimeout, 3 retries
	const lease, interval = 3 * time.Second, time.Second
	s := newScheduler(t, cc, renewal.WithLease(lease), renewal.WithInterval(interval))

	base := redistest.Name(t)
	masters := c.Masters(t)
	frozen := masters[0]
	var frozenKeys, healthy []string
	first := c.SlotRanges(t, frozen)[0][0]
	for i := range 3 { // three slots on the frozen master
		frozenKeys = append(frozenKeys, redistest.KeyInSlot(base+"-frozen", first+i))
	}
	direct := map[string]*redis.Client{}
	for _, m := range masters[1:] {
		mc := m.NewClient(t)
		for i := range 3 {
			k := redistest.KeyInSlot(base+"-healthy", c.SlotRanges(t, m)[0][0]+i)
			healthy = append(healthy, k)
			direct[k] = mc
		}
	}
	lost := make(chan string, 20)
	for _, k := range append(append([]string{}, frozenKeys...), healthy...) {
		holdOn(t, cc, k, "c:1", lease)
		s.Add(k, "c:1", time.Now(), func(err error) { lost <- k + ": " + err.Error() })
	}
	n := uint64(len(frozenKeys) + len(healthy))
	require.Eventually(t, func() bool { return s.Stats().Renewed >= n }, 10*time.Second, time.Millisecond, "a first round renewed every lock")
	// A freeze shorter than the cluster's node timeout (a long GC pause, a
	// stalled VM): no failover, so the healthy masters keep serving (with
	// the 2 s timeout of the test cluster they would refuse every command,
	// CLUSTERDOWN, between the frozen master's failure and its replica's
	// promotion).
	for _, nd := range c.Nodes() {
		require.NoError(t, nd.NewClient(t).ConfigSet(context.Background(), "cluster-node-timeout", "60000").Err())
	}

	frozen.Freeze()
	t.Cleanup(frozen.Thaw) // before the scheduler's Close (cleanups run last-in first-out)
	frozeAt := time.Now()
	// Two leases: without renewal every healthy lock would be gone. (The
	// frozen master's replica may take over meanwhile; its locks may be
	// renewed there or reported lost: either is right.)
	for time.Since(frozeAt) < 2*lease {
		select {
		case msg := <-lost:
			for _, k := range healthy {
				require.False(t, strings.HasPrefix(msg, k+":"), "a lock on a healthy master was reported lost: %s", msg)
			}
		case <-time.After(100 * time.Millisecond):
		}
		for _, k := range healthy {
			ttl, err := direct[k].PTTL(context.Background(), k).Result()
			require.NoError(t, err)
			require.Positive(t, ttl, "%s expired %v after the freeze", k, time.Since(frozeAt))
		}
	}
	for _, k := range healthy {
		ttl, err := direct[k].PTTL(context.Background(), k).Result()
		require.NoError(t, err)
		require.Greater(t, ttl, lease-interval-time.Second, "%s renewed lately", k)
	}
}

// ringOf returns a Ring over two servers of b's kind: b itself and a new
// one.
func ringOf(t *testing.T, b *redistest.Backend) *redis.Ring {
	t.Helper()
	other := redistest.Mini(t)
	if b.IsReal() {
		other = redistest.Real(t)
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": b.Addr, "b": other.Addr}})
	t.Cleanup(func() { _ = ring.Close() })
	return ring
}

// Issue 12, defect 5: a renewal batch is one script call with many keys,
// and a Ring routes it by its first key, so only one shard's locks were
// renewed; the others were reported lost at the first tick. Every lock on
// every shard is renewed.
func TestRingRenewsEveryShard(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		ring := ringOf(t, b)
		const lease, n = 3 * time.Second, 40
		s := newScheduler(t, ring, renewal.WithLease(lease), renewal.WithInterval(100*time.Millisecond))
		base := redistest.Name(t)
		shards := map[string]int{}
		lost := make(lossLog, n)
		var keys []string
		for i := range n {
			k := fmt.Sprintf("%s:%d", base, i)
			shard, err := ring.GetShardClientForKey(k)
			require.NoError(t, err)
			shards[shard.Options().Addr]++
			holdOn(t, ring, k, "c:1", lease)
			s.Add(k, "c:1", time.Now(), lost.report)
			keys = append(keys, k)
		}
		require.Len(t, shards, 2, "locks on both shards")
		from := s.Stats()
		require.Eventually(t, func() bool { return s.Stats().Rounds >= from.Rounds+3 }, 10*time.Second, time.Millisecond)
		require.Len(t, lost, 0, "no lock reported lost")
		require.Zero(t, s.Stats().Lost)
		require.Equal(t, n, s.Stats().Registered)
		for _, k := range keys {
			ttl, err := ring.PTTL(ctx, k).Result()
			require.NoError(t, err)
			require.Greater(t, ttl, lease-time.Second, "%s renewed", k)
		}
	})
}

// Issue 12, defect 14: at scale on a cluster the watchdog lost locks
// (renewal was a round trip per slot, one after another). 100,000 leases of
// 3 s, renewed every second, on a single redis-server and on the 3-master
// cluster: none is reported lost, and every key's TTL was set by a renewal.
// Under the race detector, which slows go-redis about tenfold, 10,000.
func TestHundredThousandLeasesLoseNone(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 100,000 leases")
	}
	t.Run("redis", func(t *testing.T) {
		scaleRun(t, redistest.StartServer(t).NewClient(t))
	})
	t.Run("cluster", func(t *testing.T) {
		scaleRun(t, redistest.SharedCluster(t).NewClient(t))
	})
}

func scaleRun(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	n := 100_000
	lease, interval := 3*time.Second, time.Second
	if raceDetector {
		// The race detector slows the client several times over, and CI
		// shares two CPUs with other test binaries: fewer leases, and a
		// lease that leaves a starved round more slack before it counts
		// as lost (still three rounds per lease, as Redisson's 30 s / 10 s).
		n = 10_000
		lease = 6 * time.Second
		interval = 2 * time.Second
	}
	base := redistest.Name(t)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s:%d", base, i)
	}
	// Written with a TTL far longer than the lease, so that writing them
	// all may take any time: a renewal sets it to the lease.
	perNode(t, rdb, keys, func(pipe redis.Pipeliner, k string) {
		pipe.HSet(ctx, k, "c:1", 1)
		pipe.PExpire(ctx, k, time.Minute)
	})
	s := newScheduler(t, rdb, renewal.WithLease(lease), renewal.WithInterval(interval))
	var mu sync.Mutex
	var lost []error
	added := time.Now() // the scheduler counts each lease from here
	for _, k := range keys {
		s.Add(k, "c:1", added, func(err error) {
			mu.Lock()
			lost = append(lost, err)
			mu.Unlock()
		})
	}
	// Three full rounds, and more than a lease since the leases were
	// added: a lease not renewed in time would have been reported lost.
	// (Stop at the first loss.)
	lostN := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(lost)
	}
	require.Eventually(t, func() bool {
		return lostN() > 0 || s.Stats().Renewed >= 3*uint64(n) && time.Since(added) > lease+interval
	}, time.Minute, 10*time.Millisecond)
	st := s.Stats()
	mu.Lock()
	nLost, some := len(lost), errors.Join(lost[:min(len(lost), 3)]...)
	mu.Unlock()
	require.Zero(t, nLost, "%d of %d lost, e.g. %v; %+v", nLost, n, some, st)
	require.Zero(t, st.Lost)
	require.Equal(t, n, st.Registered)
	t.Logf("%+v", st)

	ttls := make(map[string]*redis.DurationCmd, n)
	perNode(t, rdb, keys, func(pipe redis.Pipeliner, k string) { ttls[k] = pipe.PTTL(ctx, k) })
	for _, k := range keys {
		ttl := ttls[k].Val()
		require.True(t, ttl > 0 && ttl <= lease, "%s: TTL %v not set by a renewal", k, ttl)
	}
}

// perNode runs fn on a pipeline for every key, one pipeline per node (a
// ClusterClient's own pipeline is much slower at this scale), and fails t
// on any error. fn is called from one goroutine at a time.
func perNode(t *testing.T, rdb redis.UniversalClient, keys []string, fn func(redis.Pipeliner, string)) {
	t.Helper()
	ctx := context.Background()
	byNode := map[*redis.Client][]string{}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		bySlot := map[int]*redis.Client{}
		for _, k := range keys {
			c := bySlot[base.Slot(k)]
			if c == nil {
				var err error
				c, err = cc.MasterForKey(ctx, k)
				require.NoError(t, err)
				bySlot[base.Slot(k)] = c
			}
			byNode[c] = append(byNode[c], k)
		}
	} else {
		byNode[rdb.(*redis.Client)] = keys
	}
	for c, ks := range byNode {
		for lo := 0; lo < len(ks); lo += 10_000 {
			pipe := c.Pipeline()
			for _, k := range ks[lo:min(lo+10_000, len(ks))] {
				fn(pipe, k)
			}
			_, err := pipe.Exec(ctx)
			require.NoError(t, err)
		}
	}
}

// slowScripter answers every renewal "held" after delay (in the bubble's
// fake time) and records when each call started and how many ran at once.
type slowScripter struct {
	delay time.Duration

	mu      sync.Mutex
	calls   []time.Time
	running int
	maxRun  int
}

func (f *slowScripter) renew(keys []string) *redis.Cmd {
	f.mu.Lock()
	f.calls = append(f.calls, time.Now())
	f.running++
	f.maxRun = max(f.maxRun, f.running)
	f.mu.Unlock()
	time.Sleep(f.delay)
	f.mu.Lock()
	f.running--
	f.mu.Unlock()
	vals := make([]any, len(keys))
	for i := range vals {
		vals[i] = int64(1)
	}
	cmd := redis.NewCmd(context.Background())
	cmd.SetVal(vals)
	return cmd
}

func (f *slowScripter) Eval(_ context.Context, _ string, keys []string, _ ...any) *redis.Cmd {
	return f.renew(keys)
}

func (f *slowScripter) EvalSha(_ context.Context, _ string, keys []string, _ ...any) *redis.Cmd {
	return f.renew(keys)
}

func (f *slowScripter) EvalRO(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(errors.New("not used"))
	return cmd
}

func (f *slowScripter) EvalShaRO(ctx context.Context, s string, k []string, a ...any) *redis.Cmd {
	return f.EvalRO(ctx, s, k, a...)
}

func (f *slowScripter) ScriptExists(ctx context.Context, _ ...string) *redis.BoolSliceCmd {
	return redis.NewBoolSliceCmd(ctx)
}

func (f *slowScripter) ScriptLoad(ctx context.Context, _ string) *redis.StringCmd {
	return redis.NewStringCmd(ctx)
}

// Issue 12, defect 14: a tick that came due while the previous round was
// still in flight was skipped, so with renewal slower than the interval the
// real period became twice the interval. Here every renewal takes 1.5
// intervals: the next round starts as soon as the previous one answers,
// one round at a time.
func TestTickDueWhileBusyIsNotSkipped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, delay = time.Second, 1500 * time.Millisecond
		f := &slowScripter{delay: delay}
		s, err := renewal.New(f, renewal.WithLease(10*time.Second), renewal.WithInterval(interval))
		require.NoError(t, err)
		lost := make(lossLog, 1)
		s.Add("k", "c:1", time.Now(), lost.report)
		time.Sleep(30 * time.Second)
		synctest.Wait()
		s.Close()
		require.Len(t, lost, 0)
		f.mu.Lock()
		defer f.mu.Unlock()
		require.Equal(t, 1, f.maxRun, "one round at a time")
		for i := 1; i < len(f.calls); i++ {
			require.LessOrEqual(t, f.calls[i].Sub(f.calls[i-1]), delay, "round %d started %v after the previous one", i, f.calls[i].Sub(f.calls[i-1]))
		}
		require.Greater(t, len(f.calls), 15)
	})
}

// Issue 12, defect 14: every lease that ran out was reported as "ran out
// while renewal failed", even when no renewal had failed. A loss names its
// cause: not held at renewal; ran out while renewal failed, with the error;
// ran out before a renewal could reach the server.
func TestLossMessageNamesTheCause(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		direct := b.NewClient(t)

		t.Run("not held", func(t *testing.T) {
			s := newScheduler(t, direct, renewal.WithLease(time.Second), renewal.WithInterval(100*time.Millisecond))
			name := redistest.Name(t)
			lost := make(lossLog, 1)
			s.Add(name, "c:1", time.Now(), lost.report) // never written
			err := <-lost
			require.ErrorIs(t, err, rlock.ErrLockLost)
			require.Contains(t, err.Error(), "no longer held by this owner at renewal")
		})

		t.Run("renewal failed", func(t *testing.T) {
			proxy, rdb := b.NewProxiedClient(t, func(o *redis.Options) {
				o.ReadTimeout = 50 * time.Millisecond
				o.MaxRetries = -1
			})
			const lease = 600 * time.Millisecond
			s := newScheduler(t, rdb, renewal.WithLease(lease), renewal.WithInterval(200*time.Millisecond))
			name := redistest.Name(t)
			hold(t, direct, name, "c:1", lease)
			lost := make(lossLog, 1)
			s.Add(name, "c:1", time.Now(), lost.report)
			proxy.Blackhole(true)
			t.Cleanup(func() { proxy.Blackhole(false); proxy.ResetAll() })
			err := <-lost
			require.ErrorIs(t, err, rlock.ErrLockLost)
			require.Contains(t, err.Error(), "ran out while renewal failed: ")
			require.Contains(t, err.Error(), "timeout", "the renewal's error is named")
		})

		t.Run("never reached", func(t *testing.T) {
			// A round stuck on a blackholed connection for 5 s: a lease
			// added meanwhile runs out before any renewal reaches the
			// server.
			proxy, rdb := b.NewProxiedClient(t, func(o *redis.Options) {
				o.ReadTimeout = 5 * time.Second
				o.MaxRetries = -1
				o.PoolSize = 1
			})
			const lease = 600 * time.Millisecond
			s := newScheduler(t, rdb, renewal.WithLease(lease), renewal.WithInterval(200*time.Millisecond))
			first, second := redistest.Name(t), redistest.Name(t)
			hold(t, direct, first, "c:1", time.Minute)
			hold(t, direct, second, "c:1", time.Minute)
			firstLost, secondLost := make(lossLog, 1), make(lossLog, 1)
			require.NoError(t, rdb.Ping(ctx).Err())
			proxy.Blackhole(true)
			t.Cleanup(func() { proxy.Blackhole(false); proxy.ResetAll() })
			s.Add(first, "c:1", time.Now(), firstLost.report)
			require.Eventually(t, func() bool { return s.Stats().Rounds >= 1 }, 5*time.Second, time.Millisecond)
			s.Add(second, "c:1", time.Now(), secondLost.report)
			err := <-secondLost
			require.ErrorIs(t, err, rlock.ErrLockLost)
			require.Contains(t, err.Error(), "ran out before a renewal could reach")
		})
	})
}
