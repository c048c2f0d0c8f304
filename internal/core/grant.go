package core

import (
	"context"
	"time"
)

// Grant tells a combinator (MultiLock, RedLock) what one of its members'
// acquisitions created, so that it never changes the lease of a hold it
// did not create. The combinator passes a fresh Grant in the ctx of the
// member's LockLease or TryLockLease (WithGrant); a lock fills it in when
// the call succeeds, before it returns. On failure it is left untouched.
type Grant struct {
	// Reentry reports that the owner held the lock already, so the
	// acquisition only counted one more hold.
	Reentry bool
	// SetLease, when not nil, sets the lease of exactly the holds the
	// acquisition created: a combinator over members of which some were
	// re-entered reports it, and its parent calls it instead of the
	// member's own SetLease.
	SetLease func(ctx context.Context, lease time.Duration) error
	// Ctx is the same holding as a context: cancelled when it
	// ends, with a cause wrapping ErrLockLost on loss and
	// context.Canceled on release.
	Ctx context.Context
	// Until returns the time up to which the holding is known to
	// last (see Lock.Until); the zero time once it ended.
	Until func() time.Time
	// Inline, set by the combinator before the call, runs the member's
	// attempt on the calling goroutine even when ctx can end: the
	// combinator calls each member in a goroutine of its own and stops
	// waiting for it when ctx ends, so the member need not return
	// before its reply comes. A grant that comes after ctx ended is
	// given back before the call returns ctx's error, as always.
	Inline bool
}

type grantKey struct{}

// WithGrant returns ctx carrying g, replacing any Grant ctx carried: a
// combinator passes a fresh one to each member, or nil to hide its own
// caller's from the nodes it acquires.
func WithGrant(ctx context.Context, g *Grant) context.Context {
	return context.WithValue(ctx, grantKey{}, g)
}

// GrantFrom returns the Grant ctx carries, or nil.
func GrantFrom(ctx context.Context) *Grant {
	g, _ := ctx.Value(grantKey{}).(*Grant)
	return g
}

// reportGrant fills in the Grant ctx carries, if any, for a grant that
// left o's owner with holds holds.
func reportGrant(ctx context.Context, o *ownerState, holds int64) {
	g := GrantFrom(ctx)
	if g == nil {
		return
	}
	hp := o.holding.Load()
	g.Reentry = holds > 1 // the server's count: it held before this grant
	g.Ctx, g.Until = hp.ctx, hp.knownUntil
}
