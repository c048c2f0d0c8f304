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
	return OnNextWakeUp(ctx, cancel)
}

// OnNextWakeUp arranges, for tests, that fn runs once in a Lock waiting
// with ctx, after its next wake-up and before it acts on it (looks at the
// lock or tries for it). Call restore when done.
func OnNextWakeUp(ctx context.Context, fn func()) (restore func()) {
	testHookWoken.Store(onceIn(ctx, fn))
	return func() { testHookWoken.Store(nil) }
}

// onceIn returns a hook that runs fn the first time it is called with ctx
// (the call of the Lock that ctx was given to), and does nothing otherwise.
func onceIn(ctx context.Context, fn func()) *func(context.Context) {
	var once sync.Once
	hook := func(hctx context.Context) {
		if hctx == ctx {
			once.Do(fn)
		}
	}
	return &hook
}

// testHookRetried, when set, runs in a waiting Lock after each attempt
// that followed its first (a wake-up's or a timer's), once the wake-up's
// pass-on, if any, is done: tests use it to know that such an attempt
// has ended.
var testHookRetried atomic.Pointer[func(context.Context)]

// OnRetried arranges, for tests, that fn runs in a Lock waiting with ctx
// after each of its attempts but the first, once any wake-up it passes
// on is passed. Call restore when done.
func OnRetried(ctx context.Context, fn func()) (restore func()) {
	hook := func(hctx context.Context) {
		if hctx == ctx {
			fn()
		}
	}
	testHookRetried.Store(&hook)
	return func() { testHookRetried.Store(nil) }
}

// testHookAttempted, when set, runs in a blocking Lock after its first
// attempt left it waiting and before the call joins its channel (a plan
// that joins early has joined before the attempt): tests use it to publish
// a release in that window.
var testHookAttempted atomic.Pointer[func(context.Context)]

// testJoinLate, when set, makes every blocking Lock join its channel after
// its first attempt, whatever its plan says: tests use it to show what
// joining early prevents.
var testJoinLate atomic.Bool

// BetweenAttemptAndJoin arranges, for tests, that fn runs in a blocking
// Lock with ctx after its first attempt was refused and before the call
// joins its channel to wait (or, when its plan joins early, after it
// joined). Call restore when done.
func BetweenAttemptAndJoin(ctx context.Context, fn func()) (restore func()) {
	testHookAttempted.Store(onceIn(ctx, fn))
	return func() { testHookAttempted.Store(nil) }
}

// JoinLate makes, for tests, every blocking Lock join its channel only
// after its first attempt, as if no plan asked to join early. Call restore
// when done.
func JoinLate() (restore func()) {
	testJoinLate.Store(true)
	return func() { testJoinLate.Store(false) }
}

// Probe joins channel on c's pub/sub hub, for tests: signals receives a
// value once the subscription is confirmed and for every message on
// channel (signals pending at once are one value). The hub handles one connection's messages in order, so a probe signalled
// for a message published after another shows that the other was handled
// too. Call leave when done; ok is false when the client is closed.
func (c *Client) Probe(channel string) (signals <-chan struct{}, leave func(), ok bool) {
	w, ok := c.hub.Join(channel)
	if !ok {
		return nil, nil, false
	}
	return w.C, w.Leave, true
}

// testSecondGrace, when not zero, replaces defaultSecondGrace.
var testSecondGrace atomic.Int64

// SetSecondGrace sets, for tests, how long the second designee of a
// release waits for the first to act before it looks at the lock. Call
// restore when done.
func SetSecondGrace(d time.Duration) (restore func()) {
	testSecondGrace.Store(int64(d))
	return func() { testSecondGrace.Store(0) }
}
