package renewal

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// unreachable is a client whose every renewal fails at once, as a server
// behind a black hole would (without the wait).
type unreachable struct{}

func failed(ctx context.Context) *redis.Cmd {
	c := redis.NewCmd(ctx)
	c.SetErr(errors.New("unreachable"))
	return c
}

func (unreachable) Eval(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return failed(ctx)
}

func (unreachable) EvalSha(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return failed(ctx)
}

func (unreachable) EvalRO(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return failed(ctx)
}

func (unreachable) EvalShaRO(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return failed(ctx)
}

func (unreachable) ScriptExists(ctx context.Context, _ ...string) *redis.BoolSliceCmd {
	return redis.NewBoolSliceCmd(ctx)
}

func (unreachable) ScriptLoad(ctx context.Context, _ string) *redis.StringCmd {
	return redis.NewStringCmd(ctx)
}

// Issue 27 ("Done closes seconds after the lease ran out"): every lease
// carried by a tick had a runtime timer of its own, and each fired in a
// goroutine of its own, so 20,000 leases that ran out together made the
// runtime create 20,000 goroutines before the first report ran (0.1-0.2 s
// after until on a busy P), which then queued behind the work starving
// the CPU. The watch reports a due bucket from a few goroutines of
// deliverShare leases each. Here 20,000 leases run out together on one P
// kept busy by two goroutines: every one is reported lost once, while
// the process never held more than a few hundred goroutines beyond its
// own (the old timers: about 20,000), and the delays are logged.
func TestLeasesRunningOutTogetherAreReportedByFewGoroutines(t *testing.T) {
	const n = 20000
	const lease = 2 * time.Second
	s, err := New(unreachable{}, WithLease(lease), WithInterval(100*time.Millisecond))
	require.NoError(t, err)
	defer s.Close()
	sent := time.Now()
	until := sent.Add(lease)
	lostAt := make([]atomic.Int64, n)
	var reports atomic.Int64
	var most atomic.Int64 // goroutines seen by a report
	var all sync.WaitGroup
	leases := make([]*Lease, n)
	all.Add(n)
	for i := range leases {
		leases[i] = s.Add("k"+strconv.Itoa(i), "c:1", sent, func(error) {
			if lostAt[i].Swap(time.Now().UnixNano()) == 0 {
				all.Done()
			}
			reports.Add(1)
			for g := int64(runtime.NumGoroutine()); ; {
				m := most.Load()
				if g <= m || most.CompareAndSwap(m, g) {
					break
				}
			}
		})
	}
	// The first tick hands them all to the watch.
	require.Eventually(t, func() bool {
		for _, l := range leases {
			if !l.armed.Load() {
				return false
			}
		}
		return true
	}, lease/2, time.Millisecond, "a tick carried every lease")

	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	stop := make(chan struct{})
	var burners sync.WaitGroup
	for range 2 {
		burners.Add(1)
		go func() {
			defer burners.Done()
			for x := uint64(1); ; x = x*6364136223846793005 + 1 {
				if x%1024 == 0 {
					select {
					case <-stop:
						return
					default:
					}
				}
			}
		}()
	}
	base := runtime.NumGoroutine()
	require.True(t, time.Now().Before(until), "the leases ran out before the test was ready")
	all.Wait()
	close(stop)
	burners.Wait()

	require.EqualValues(t, n, reports.Load(), "each lease reported lost once")
	st := s.Stats()
	require.EqualValues(t, n, st.Lost)
	require.Zero(t, st.Registered)
	delays := make([]time.Duration, n)
	for i := range lostAt {
		delays[i] = time.Duration(lostAt[i].Load() - until.UnixNano())
	}
	slices.Sort(delays)
	extra := most.Load() - int64(base)
	t.Logf("%d leases reported after until: min %v, median %v, max %v; at most %d goroutines beyond the %d before",
		n, delays[0], delays[n/2], delays[n-1], extra, base)
	require.GreaterOrEqual(t, delays[0], time.Duration(0), "a lease was reported lost before its until")
	require.LessOrEqual(t, extra, int64(n/deliverShare+50), "leases due together were reported from a goroutine apiece")
}
