package waiters_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/internal/waiters"
)

// TestCountingDesignations: on a counting channel, a count that follows
// designations wakes as many waiters as they name this hub's client (at
// most the count) and none when they name only others; designations it
// cannot use (no waiter without a wake-up pending) are reported as wasted.
// A designation is a
// multiple of 2^32, which Redisson's listener reads as 0.
func TestCountingDesignations(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.NewClient(t)
		h := newHub(t, rdb)
		defer h.Close()
		const myTag, otherTag = "424242", "777"
		h.SetDesignation(myTag, nil)
		mine, other := waiters.CountingDesignation(myTag), waiters.CountingDesignation(otherTag)
		for _, d := range []string{mine, other} {
			v, err := strconv.ParseInt(d, 10, 64)
			require.NoError(t, err)
			require.Zero(t, int32(v), "Redisson's intValue() of a designation is 0")
			require.Less(t, v, int64(1)<<53)
		}
		require.NotEqual(t, mine, other)

		ch := redistest.Name(t)
		var wasted atomic.Int64
		w1, ok := h.JoinCounting(ch, func() { wasted.Add(1) })
		require.True(t, ok)
		require.True(t, signalled(w1), "the subscription's confirmation")
		w2, ok := h.JoinCounting(ch, nil)
		require.True(t, ok)
		publish := func(msgs ...string) {
			for _, m := range msgs {
				require.NoError(t, rdb.Publish(ctx, ch, m).Err())
			}
		}

		publish(other, "1")
		publish(mine, "1") // a marker: the message before it was handled
		require.True(t, signalled(w1), "designated once: one waiter")
		require.True(t, quiet(w2), "designated for another client: nobody woken")

		publish(mine, mine, "5")
		require.Eventually(t, func() bool { return len(w1.C) == 1 && len(w2.C) == 1 }, 5*time.Second, time.Millisecond,
			"designated twice: two waiters")
		<-w1.C
		<-w2.C

		publish(mine, mine, mine, "3")
		require.Eventually(t, func() bool { return wasted.Load() == 1 }, 5*time.Second, time.Millisecond,
			"three designations, two waiters: one wasted")
		w1.Leave()
		w2.Leave()
	})
}

// TestPlainCountWakesDistinctWaiters: an undesignated count n (Redisson's
// release) wakes n distinct waiters (at most all of them), as Redisson's
// listener wakes min(waiters, n). Before, each of the n wake-ups went to
// the first waiter with no wake-up pending; a waiter parked on its
// channel takes a wake-up at once, leaving nothing pending, so "2" woke
// the longest-waiting waiter twice and the second not at all (the "2"
// that woke one of two waiters in TestCountingDesignations' first runs).
func TestPlainCountWakesDistinctWaiters(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.NewClient(t)
		h := newHub(t, rdb)
		defer h.Close()
		h.SetDesignation("424242", nil)
		ch := redistest.Name(t)
		ws := make([]*waiters.Waiter, 3)
		for i := range ws {
			w, ok := h.JoinCounting(ch, nil)
			require.True(t, ok)
			ws[i] = w
		}
		require.True(t, signalled(ws[0]), "the subscription's confirmation")
		for _, w := range ws[1:] {
			<-w.C
		}
		var woken [3]atomic.Int64
		var total atomic.Int64
		done := make(chan struct{})
		defer close(done)
		for i, w := range ws {
			go func() { // parked on its channel, as a waiting Acquire is
				for {
					select {
					case <-w.C:
						woken[i].Add(1)
						total.Add(1)
					case <-done:
						return
					}
				}
			}()
		}
		for round := range 10 {
			before := total.Load()
			require.NoError(t, rdb.Publish(ctx, ch, "2").Err())
			require.Eventually(t, func() bool { return total.Load() == before+2 }, 5*time.Second, time.Millisecond)
			require.Equal(t, []int64{int64(round + 1), int64(round + 1), 0},
				[]int64{woken[0].Load(), woken[1].Load(), woken[2].Load()}, "round %d: two permits, two distinct waiters", round)
		}
		for _, w := range ws {
			w.Leave()
		}
	})
}
