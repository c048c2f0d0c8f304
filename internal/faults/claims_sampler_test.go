package faults

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/rwlock"
)

// TestClaimsSamplerReadsRWLocks: the sampler must read a read-write lock
// whose writer keeps no write-until record (the usual case): a GET of a
// missing key answers redis.Nil, which is no failure of the read. Before
// the fix every such sample was dropped as unreadable ("no verdict"), so
// the read-write fault runs compared nothing. The sampler must also see a
// read hold whose timeout keys are gone (a Cover violation), and a
// writer's hold no handle claims (an Orphan).
func TestClaimsSamplerReadsRWLocks(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		c := newTestClient(t, b.NewClient(t))
		l, err := rwlock.New(c, name)
		require.NoError(t, err)
		wc := newTestClient(t, b.NewClient(t))
		w, err := rwlock.New(wc, name)
		require.NoError(t, err)
		field, wfield := owner(t, l.ReadLock()), owner(t, w.WriteLock())
		var act, wact activity
		newCheck := func() *claimCheck {
			cc := newClaimCheck(t, 300*time.Millisecond, b.Universal(t))
			cc.add(handleClaim("reader", l.ReadLock(), &act, 0, name, field, true))
			cc.add(handleClaim("writer", w.WriteLock(), &wact, 0, name, base.WriterField(wfield), false))
			return cc
		}

		// A reader holds: the sample reads the server and finds it right.
		require.NoError(t, l.ReadLock().Lock(ctx))
		cc := newCheck()
		cc.sample()
		samples, checked, violations, first := cc.result()
		require.Equal(t, 1, samples)
		require.Positive(t, checked, "the sample compared nothing: the server read was dropped")
		require.Zero(t, violations, "%v", first)

		// The reader's timeout keys vanish behind its back: Cover fails.
		rdb := b.Universal(t)
		for n := int64(1); n <= maxReadKeys; n++ {
			require.NoError(t, rdb.Del(ctx, base.RWTimeoutKey(name, field, n)).Err())
		}
		cc = newCheck()
		cc.sample()
		_, _, violations, first = cc.result()
		require.Equal(t, 1, violations, "%v", first)
		require.Contains(t, first[0], "cover: reader")
		_ = l.ReadLock().Unlock(ctx) // the server has no read hold left to release
		require.NoError(t, rdb.Del(ctx, name).Err())

		// A write hold whose handle says nothing: an Orphan.
		require.NoError(t, w.WriteLock().Lock(ctx))
		require.NoError(t, rdb.HSet(ctx, name, base.WriterField(wfield), 1).Err())
		forged := newClaimCheck(t, 0, b.Universal(t))
		forged.add(handleClaim("reader", l.ReadLock(), &act, 0, name, field, true))
		forged.add(handleClaim("stranger", silent{}, &wact, 0, name, base.WriterField(wfield), false))
		forged.sample()
		_, _, violations, first = forged.result()
		require.Equal(t, 1, violations, "%v", first)
		require.Contains(t, first[0], "orphan")
		require.NoError(t, w.WriteLock().Unlock(ctx))
	})
}

// silent is a handle that never says it holds.
type silent struct{}

func (silent) Err() error       { return nil }
func (silent) Until() time.Time { return time.Time{} }
