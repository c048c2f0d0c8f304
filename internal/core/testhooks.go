package core

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// testHookGranted, when set, runs in a background attempt after a grant
// was found in time and before the caller is asked to take it: tests use
// it to end ctx in that window.
var testHookGranted atomic.Pointer[func(context.Context)]

// testHookWoken, when set, runs in a waiting Lock after a wake-up and
// before the attempt it starts: tests use it to end ctx in that window.
var testHookWoken atomic.Pointer[func(context.Context)]

// AbandonNextGrant arranges, for tests, that the next attempt with ctx
// that is granted in time has ctx end (by cancel) before it hands the grant
// over, and then waits (up to 10 s) until the caller has returned, as when
// ctx ends in that window by chance. Call returned once the caller's Lock
// has returned; call restore when done.
func AbandonNextGrant(ctx context.Context, cancel context.CancelFunc) (returned, restore func()) {
	back := make(chan struct{})
	hook := func(gctx context.Context) {
		if gctx != ctx {
			return
		}
		cancel()
		select {
		case <-back:
		case <-time.After(10 * time.Second): // the caller never returned: its test fails
		}
	}
	testHookGranted.Store(&hook)
	return sync.OnceFunc(func() { close(back) }), func() { testHookGranted.Store(nil) }
}

// FailNextWokenAttempt arranges, for tests, that the next wake-up of a
// Lock waiting with ctx is followed by cancel, so the attempt it starts
// fails, as when ctx ends in that window by chance. Call restore when done.
func FailNextWokenAttempt(ctx context.Context, cancel context.CancelFunc) (restore func()) {
	var once sync.Once
	hook := func(wctx context.Context) {
		if wctx == ctx {
			once.Do(cancel)
		}
	}
	testHookWoken.Store(&hook)
	return func() { testHookWoken.Store(nil) }
}
