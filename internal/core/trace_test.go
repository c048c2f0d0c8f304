package core

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/redistest"
)

// TestNoHooksNoAllocations: without hooks, what the engine does to report
// its events (a call's start, its end, waiting, a holding's start and its
// release) allocates nothing; with hooks that keep nothing, neither.
func TestNoHooksNoAllocations(t *testing.T) {
	rdb := redistest.Mini(t).NewClient(t)
	noop := Hooks{AcquireDone: func(AcquireEvent) {}, Released: func(HoldEvent) {}, Lost: func(HoldEvent) {}, Waiting: func(WaitEvent) {}}
	for _, tc := range []struct {
		name  string
		hooks []Hooks
	}{{"none", nil}, {"empty", []Hooks{{}}}, {"noop", []Hooks{noop, noop}}} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewClient(rdb, Config{Hooks: tc.hooks})
			require.NoError(t, err)
			defer c.Close()
			l, err := c.NewLock("allocs", LockConfig{})
			require.NoError(t, err)
			o := c.owner(nil, l.name, l.ownField)
			defer c.putOwner(o)
			hp := newHolding(0)
			ws := &waitState{l: l, o: o}
			allocs := testing.AllocsPerRun(100, func() {
				start := c.ev.now()
				ws.startWaiting()
				ws.stopWaiting()
				l.acquireDone(o, start, true, true, nil)
				hp.began(l, o)
				hp.report(nil)
			})
			require.Zero(t, allocs)
		})
	}
}

// BenchmarkLockUnlockTrace: a lock and unlock with no hooks, and with
// hooks that keep nothing (compare allocs/op), on redis-server, where the
// allocations counted are the client's only.
func BenchmarkLockUnlockTrace(b *testing.B) {
	rdb := redistest.Real(b).NewClient(b)
	noop := Hooks{AcquireDone: func(AcquireEvent) {}, Released: func(HoldEvent) {}, Lost: func(HoldEvent) {}, Waiting: func(WaitEvent) {}}
	for _, bc := range []struct {
		name  string
		hooks []Hooks
	}{{"none", nil}, {"noop", []Hooks{noop}}} {
		b.Run(bc.name, func(b *testing.B) {
			c, err := NewClient(rdb, Config{Hooks: bc.hooks, NoReplicaSync: true})
			require.NoError(b, err)
			defer c.Close()
			l, err := c.NewLock("bench-trace", LockConfig{Lease: time.Minute})
			require.NoError(b, err)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := l.Lock(ctx); err != nil {
					b.Fatal(err)
				}
				if err := l.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
