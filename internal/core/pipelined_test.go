package core

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/redistest"
)

// An auto-pipelined attempt waits for its reply on the caller's goroutine,
// which must not wait for Redis in anything else: an owner whose earlier
// call must be settled first goes to a worker. toSettle says when, and must
// agree with prepare on every owner state: prepare sends a command exactly
// when toSettle reports true.
func TestToSettleAgreesWithPrepare(t *testing.T) {
	b := redistest.Mini(t)
	rdb := b.NewClient(t)
	sent := &redistest.Commands{}
	rdb.AddHook(sent)
	c, err := NewClient(rdb, Config{NoReplicaSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	for _, unsure := range []bool{false, true} {
		for _, resend := range []bool{false, true} {
			for _, retrying := range []bool{false, true} {
				for _, count := range []int64{0, 1} {
					for _, ended := range []bool{false, true} {
						name := fmt.Sprintf("unsure=%v,resend=%v,retrying=%v,count=%d,ended=%v", unsure, resend, retrying, count, ended)
						l, err := c.NewLock(redistest.Name(t)+":"+name, LockConfig{Kind: Reentrant, Lease: base.WatchdogMode})
						require.NoError(t, err)
						o := c.owner(nil, l.name, l.ownField)
						require.NoError(t, o.acquire(ctx))
						o.unsure, o.resend = unsure, resend
						o.setCount(count)
						hp := newHolding(0)
						o.holding.Store(hp)
						if ended {
							hp.end(errors.New("lost"))
						}
						want := o.toSettle(retrying)
						before := sent.N()
						_ = l.prepare(ctx, o, retrying)
						require.Equal(t, want, sent.N() > before, name)
						o.release()
						c.putOwner(o)
					}
				}
			}
		}
	}
}

// An auto-pipelined attempt sends EVALSHA itself, without go-redis's
// Script.Run: after SCRIPT FLUSH (a restarted or promoted server) its
// NOSCRIPT reply must make it send the script with EVAL, as Script.Run
// does, rather than fail the Lock.
func TestPipelinedAttemptAfterScriptFlush(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		bg := context.Background()
		rdb := b.NewClient(t)
		c, err := NewClient(rdb, Config{AutoPipeline: true, NoReplicaSync: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		l, err := c.NewLock(redistest.Name(t), LockConfig{Kind: Reentrant, Lease: base.WatchdogMode})
		require.NoError(t, err)
		c.inFlight.Add(1) // another call in flight
		require.True(t, c.waitsOnPipeliner())
		require.NoError(t, rdb.ScriptFlush(bg).Err())
		ctx, cancel := context.WithTimeout(bg, 10*time.Second)
		defer cancel()
		require.NoError(t, l.Lock(ctx))
		c.inFlight.Add(-1)
		require.NoError(t, l.Unlock(bg))
	})
}
