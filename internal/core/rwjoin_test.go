package core_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/core"
	"github.com/rlock-go/rlock/internal/redistest"
)

// A read-write waiter joined its channel only after its first attempt was
// refused: a release published in between went to the client's other
// waiters only (a reader kept out by this very writer, which cannot use
// it and does not pass it on), and the writer slept until its poll (T/3)
// or the TTL it saw (seen as a 3.3 s stall in the demo's price cache).
// Read-write waiters now join before their first attempt. Here the release
// comes exactly in that window: a reader R1 holds the lock (one-hour
// lease, one-hour writer wait) on one client; on another, a writer W is
// refused and registered as a waiting writer, and before W joins, a
// reader R2 of W's client starts waiting behind it and R1 leaves. W must
// be granted on that release. With JoinLate (the old order) it sleeps: the
// second subtest checks that it is not granted within a second, so the
// check can fail.
func TestRWReleaseBetweenRefusedAttemptAndJoinIsNotLost(t *testing.T) {
	for _, late := range []bool{false, true} {
		name := "join_early"
		if late {
			name = "join_late_the_bug"
		}
		t.Run(name, func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) { testReleaseBeforeJoin(t, b, late) })
		})
	}
}

func testReleaseBeforeJoin(t *testing.T, b *redistest.Backend, late bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := redistest.Name(t)
	newClient := func() *core.Client {
		c, err := rlock.NewClient(b.NewClient(t))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		cc, ok := core.Of(c)
		require.True(t, ok)
		return cc
	}
	newRW := func(c *core.Client) (r, w *core.Lock) {
		r, w, err := c.NewRWLock(name, core.LockConfig{Lease: time.Hour}, core.LockConfig{Lease: time.Hour, WriterWait: time.Hour})
		require.NoError(t, err)
		return r, w
	}
	holder, waiter := newClient(), newClient()
	r1, _ := newRW(holder)
	r2, _ := newRW(waiter)
	_, w := newRW(waiter)
	require.NoError(t, r1.Lock(ctx))

	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	rdone := make(chan error, 1)
	pub := b.NewClient(t)
	var hookErr error
	var retries *atomic.Int32
	if late {
		retries = new(atomic.Int32)
		defer core.OnRetried(rctx, func() { retries.Add(1) })()
	}
	restore := core.BetweenAttemptAndJoin(wctx, func() { hookErr = releaseInWindow(ctx, waiter, r1, r2, rctx, rdone, pub, name, retries) })
	defer restore()
	if late {
		defer core.JoinLate()()
	}
	wdone := make(chan error, 1)
	go func() { wdone <- w.Lock(wctx) }()

	if late {
		select {
		case err := <-wdone:
			t.Fatalf("joined late, the writer was still granted (err %v, hook %v): the test cannot tell the orders apart", err, hookErr)
		case <-time.After(time.Second):
		}
		wcancel()
		require.ErrorIs(t, <-wdone, context.Canceled)
		require.NoError(t, hookErr)
		rcancel()
		if err := <-rdone; err == nil { // the writer's leaving let the reader in first
			require.NoError(t, r2.Unlock(ctx))
		}
		return
	}
	select {
	case err := <-wdone:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatalf("the writer missed the release published between its refused attempt and its join (it waits for its poll); hook: %v", hookErr)
	}
	require.NoError(t, hookErr)
	// W's release lets the reader in.
	require.NoError(t, w.Unlock(ctx))
	require.NoError(t, <-rdone)
	require.NoError(t, r2.Unlock(ctx))
}

// releaseInWindow runs in the writer's Lock between its refused attempt
// and its join: r2, on the writer's client, starts waiting (kept out by
// the writer), then r1, the last reader, leaves; it returns once the
// writer's client has handled r1's release (a probe's message published
// after it on the same pub/sub connection has arrived).
//
// With retries (counting r2's attempts after its first; the late join,
// where r2 alone waits on a channel it opened), it also returns only once
// r2's attempt after the channel's confirmation has ended before r1
// leaves, and its attempt after r1's release has ended, passing its
// wake-up on: otherwise that pass-on could come after the writer's late
// join and wake it (r2 is refused for a waiting writer on a free lock),
// and the check that the late join misses the release would fail by
// chance (4 runs in 30 on miniredis).
func releaseInWindow(ctx context.Context, waiter *core.Client, r1, r2 *core.Lock, rctx context.Context, rdone chan<- error, pub interface {
	Publish(ctx context.Context, channel string, message any) *redis.IntCmd
}, name string, retries *atomic.Int32) error {
	before := waiter.Waiters().Waiters
	go func() { rdone <- r2.Lock(rctx) }()
	if !eventually(func() bool { return waiter.Waiters().Waiters == before+1 }) {
		return errors.New("the reader never waited")
	}
	// Subscribed after the lock's channel on the same connection: once the
	// probe is confirmed, so is the lock's channel.
	probe := name + ":probe"
	signals, leave, ok := waiter.Probe(probe)
	if !ok {
		return errors.New("client closed")
	}
	defer leave()
	if !eventually(func() bool { return len(signals) > 0 }) {
		return errors.New("the probe's subscription was never confirmed")
	}
	<-signals
	if retries != nil && !eventually(func() bool { return retries.Load() >= 1 }) {
		return errors.New("the reader never tried again after the channel's confirmation")
	}
	if err := errors.Join(r1.Unlock(ctx), pub.Publish(ctx, probe, "1").Err()); err != nil {
		return err
	}
	if !eventually(func() bool { return len(signals) > 0 }) {
		return errors.New("the probe's message never came")
	}
	if retries != nil && !eventually(func() bool { return retries.Load() >= 2 }) {
		return errors.New("the reader never tried again after the release")
	}
	return nil
}

// eventually polls cond every millisecond for up to 10 s.
func eventually(cond func() bool) bool {
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}
