package faults

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/multilock"
	"github.com/rlock-go/rlock/reentrant"
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

// TestClaimsSamplerJudgesMultiLocks: the sampler's verdict on a MultiLock
// claim over three servers. All mode: one member gone behind the handle's
// back is a Cover violation. Quorum mode (2 of 3): one member gone is
// not, two are; and a server the sampler cannot read (down, frozen) is
// not counted for the claim: with it unreadable and one of the two others
// gone, the claim is a violation.
func TestClaimsSamplerJudgesMultiLocks(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := rlock.WithOwner(context.Background(), "o")
		nodes := multiNodes(t, b)
		name := redistest.Name(t)
		var direct []redis.UniversalClient
		var members []rlock.Locker
		var ms []member
		for j, n := range nodes {
			direct = append(direct, n.Universal(t))
			l, err := reentrant.New(newTestClient(t, n.NewClient(t)), name)
			require.NoError(t, err)
			members = append(members, l)
			ms = append(ms, member{server: j, name: name, field: ownerIn(t, l, ctx)})
		}
		verdict := func(h claimant, quorum int, servers ...redis.UniversalClient) (int, []string) {
			cc := newClaimCheck(t, time.Second, servers...)
			cc.add(&claim{label: "multi", h: h, act: &activity{}, members: ms, quorum: quorum, orphans: true})
			cc.sample()
			_, checked, violations, first := cc.result()
			require.Positive(t, checked)
			return violations, first
		}
		for _, quorum := range []int{0, 2} {
			opts := []multilock.Option{}
			if quorum > 0 {
				opts = append(opts, multilock.WithQuorum(quorum))
			}
			ml, err := multilock.New(members, opts...)
			require.NoError(t, err)
			require.NoError(t, ml.Lock(ctx))
			v, first := verdict(ml, quorum, direct...)
			require.Zero(t, v, "%v", first)

			require.NoError(t, direct[0].Del(ctx, name).Err()) // member 0 gone
			v, first = verdict(ml, quorum, direct...)
			if quorum == 0 {
				require.Equal(t, 1, v, "all mode: a member gone must be seen")
				require.Contains(t, first[0], "cover: multi")
			} else {
				require.Zero(t, v, "quorum mode: 2 of 3 still cover: %v", first)
				// Server 2 unreadable (a closed client): it counts for
				// nothing, and members 1 alone is not a quorum.
				down := nodes[2].NewClient(t)
				require.NoError(t, down.Close())
				v, first = verdict(ml, quorum, direct[0], direct[1], down)
				require.Equal(t, 1, v, "a node that cannot be read must not make up the quorum: %v", first)
				require.NoError(t, direct[1].Del(ctx, name).Err()) // member 1 gone too
				v, first = verdict(ml, quorum, direct...)
				require.Equal(t, 1, v, "quorum mode: 1 of 3 must be seen: %v", first)
			}
			_ = ml.Unlock(ctx)
			for _, d := range direct {
				require.NoError(t, d.Del(ctx, name).Err())
			}
		}
	})
}

// ownerIn is owner for the owner carried by ctx.
func ownerIn(t *testing.T, h interface {
	Owner(context.Context) (string, error)
}, ctx context.Context) string {
	t.Helper()
	f, err := h.Owner(ctx)
	require.NoError(t, err)
	return f
}
