package redistest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRedissonDouble: the Redisson double keeps its own protocol on
// miniredis and redis-server: exclusion, re-entry, the latch, a release
// waking a blocked waiter, and the fair queue's cumulative scores (a
// joiner adds its wait to the tail's score; a grant subtracts the
// granted caller's wait from every queued score).
func TestRedissonDouble(t *testing.T) {
	Each(t, func(t *testing.T, b *Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		r := NewRedisson(b.Universal(t), false)
		name := Name(t)
		a, z := r.Lock(name, 1), r.Lock(name, 2)
		ok, err := a.TryLockNow(ctx, time.Hour)
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = a.TryLockNow(ctx, time.Hour)
		require.NoError(t, err)
		require.True(t, ok, "re-entry")
		ok, err = z.TryLockNow(ctx, time.Hour)
		require.NoError(t, err)
		require.False(t, ok)
		require.ErrorIs(t, z.Unlock(ctx), ErrIllegalMonitorState)
		got := make(chan error, 1)
		go func() { got <- z.Lock(ctx, time.Hour) }()
		require.NoError(t, a.Unlock(ctx))
		require.NoError(t, a.Unlock(ctx))
		require.NoError(t, <-got, "woken by the release, not the hour-long lease")
		gone, err := a.ForceUnlock(ctx)
		require.NoError(t, err)
		require.True(t, gone)

		fname := name + ":fair"
		h := r.FairLock(fname, 1)
		require.NoError(t, h.Lock(ctx, time.Hour))
		w1, w2 := r.FairLock(fname, 2), r.FairLock(fname, 3)
		d1, d2 := make(chan error, 1), make(chan error, 1)
		go func() { d1 <- w1.Lock(ctx, time.Hour) }()
		rdb := b.Universal(t)
		require.Eventually(t, func() bool { o, _, _ := Scores(ctx, rdb, fname); return len(o) == 1 }, 5*time.Second, time.Millisecond)
		go func() { d2 <- w2.Lock(ctx, time.Hour) }()
		require.Eventually(t, func() bool { o, _, _ := Scores(ctx, rdb, fname); return len(o) == 2 }, 5*time.Second, time.Millisecond)
		_, s, err := Scores(ctx, rdb, fname)
		require.NoError(t, err)
		require.InDelta(t, r.ThreadWaitTime.Milliseconds(), s[1]-s[0], 1, "a joiner adds its wait to the tail's score")
		require.NoError(t, h.Unlock(ctx))
		require.NoError(t, <-d1)
		_, s2, err := Scores(ctx, rdb, fname)
		require.NoError(t, err)
		require.InDelta(t, s[1]-float64(r.ThreadWaitTime.Milliseconds()), s2[0], 1, "a grant subtracts the wait")
		require.NoError(t, w1.Unlock(ctx))
		require.NoError(t, <-d2)
		require.NoError(t, w2.Unlock(ctx))
	})
}
