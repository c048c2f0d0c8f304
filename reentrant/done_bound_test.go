package reentrant_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/reentrant"
)

// doneHoldingsEnv scales TestDoneOpenPastUntil (default 400 holdings), to
// measure how long after Until Done closes when many holdings end at once.
const doneHoldingsEnv = "RLOCK_DONE_HOLDINGS"

// TestDoneOpenPastUntil: many holdings whose renewal cannot succeed (the
// server is blackholed) end at once: watchdog holdings renewed by the same
// round, and explicit leases that end together. Their losses were
// delivered one by one on the watchdog's goroutine, so a handle said Err()
// nil with Done open while its Until had passed (by seconds for 100,000
// holdings). Whenever time.Now() is past a handle's Until, Err() reports
// the loss, and Done closes for every handle.
func TestDoneOpenPastUntil(t *testing.T) {
	n := 400
	if v, err := strconv.Atoi(os.Getenv(doneHoldingsEnv)); err == nil && v > 0 {
		n = v
	}
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		proxy, rdb := b.NewProxiedClient(t, func(o *redis.Options) {
			o.ReadTimeout = 500 * time.Millisecond
			o.MaxRetries = -1
			o.PoolSize = 32
		})
		t.Cleanup(func() { proxy.Blackhole(false); proxy.ResetAll() })
		name := redistest.Name(t)
		// When each loss is reported: just before its Done closes.
		lostAt := make([]atomic.Int64, n)
		trace := &rlock.Trace{Lost: func(e rlock.LossInfo) {
			if i, err := strconv.Atoi(strings.TrimPrefix(e.Name, name+":")); err == nil && i < n {
				lostAt[i].Store(time.Now().UnixNano())
			}
		}}
		c := clientOn(t, rdb, shortWatchdog(time.Second+time.Duration(n)*100*time.Microsecond), rlock.WithTrace(trace))
		locks := make([]*reentrant.Lock, n)
		for i := range locks {
			locks[i] = newLock(t, c, name+":"+strconv.Itoa(i))
		}
		start := time.Now()
		acquireAll(t, locks, func(_ int, l *reentrant.Lock) error { return l.Lock(ctx) })
		took := time.Since(start)
		t.Logf("%d holdings taken in %v", n, took)
		// A quarter get explicit leases that end together, the rest stay
		// renewed by the watchdog.
		end := time.Now().Add(time.Second + took)
		acquireAll(t, locks[:n/4], func(_ int, l *reentrant.Lock) error {
			return l.SetLease(ctx, max(time.Until(end), 3*time.Millisecond))
		})
		proxy.Blackhole(true) // no renewal succeeds from now on
		// Other work on the client: goroutines that keep the CPU busy
		// while the holdings end.
		stop := make(chan struct{})
		var busy sync.WaitGroup
		for range 8 {
			busy.Add(1)
			go func() {
				defer busy.Done()
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
		stopBusy := sync.OnceFunc(func() { close(stop); busy.Wait() })
		defer stopBusy()

		lastUntil := make([]int64, n)
		for i, l := range locks {
			lastUntil[i] = l.Until().UnixNano()
		}
		// Each pass samples up to 1000 handles, in turn, so that the
		// sampling leaves the client CPU to end the holdings.
		violations, samples, next := 0, 0, 0
		var first string
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			for range min(n, 1000) {
				i, l := next, locks[next]
				next = (next + 1) % n
				u := l.Until()
				now := time.Now()
				if !u.IsZero() {
					lastUntil[i] = u.UnixNano()
				}
				samples++
				if !u.IsZero() && now.After(u) && l.Err() == nil {
					if violations == 0 {
						first = now.Sub(u).String()
					}
					violations++
				}
			}
			open := 0
			for _, l := range locks {
				select {
				case <-l.Done():
				default:
					open++
				}
			}
			assert.Zero(ct, open, "holdings whose Done is open")
		}, 60*time.Second, time.Millisecond)
		stopBusy()
		var late []time.Duration // for the holdings not ended before the blackhole
		for i := range lastUntil {
			if lastUntil[i] > 0 {
				late = append(late, time.Duration(lostAt[i].Load()-lastUntil[i]))
			}
		}
		slices.Sort(late)
		if m := len(late); m > 0 {
			t.Logf("Done after Until over %d of %d holdings: min %v, median %v, p99 %v, max %v",
				m, n, late[0], late[m/2], late[m*99/100], late[m-1])
		}
		require.Zerof(t, violations, "%d of %d samples found Err() nil past Until (the first %s past it)", violations, samples, first)
		for _, l := range locks {
			require.ErrorIs(t, l.Err(), rlock.ErrLockLost)
		}
	})
}

// acquireAll runs take for every lock, 32 at a time.
func acquireAll(t *testing.T, locks []*reentrant.Lock, take func(int, *reentrant.Lock) error) {
	t.Helper()
	var wg sync.WaitGroup
	next := atomic.Int64{}
	errs := make(chan error, 32)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(locks) {
					return
				}
				if err := take(i, locks[i]); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}
