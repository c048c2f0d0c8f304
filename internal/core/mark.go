package core

import "context"

// markKey is the key under which a holding's ctx marks the gate its holds
// went through (see Gate): a Lock whose ctx carries the mark re-enters.
type markKey struct{ g *Gate }

// withMark returns ctx marked as a holding through g.
func withMark(ctx context.Context, g *Gate) context.Context {
	return context.WithValue(ctx, markKey{g}, true)
}

// markedCtx is a context marked as a holding through g, embedded in the
// holding so that marking it costs no allocation.
type markedCtx struct {
	context.Context
	g *Gate
}

func (m *markedCtx) Value(key any) any {
	if k, ok := key.(markKey); ok && k.g == m.g {
		return true
	}
	return m.Context.Value(key)
}

// Reenters reports whether ctx descends from a holding through g (its Ctx,
// or a context joined with it, see Join): a Lock with such a ctx re-enters
// instead of waiting at the gate.
func Reenters(ctx context.Context, g *Gate) bool {
	return g != nil && ctx.Value(markKey{g}) != nil
}

// Mark returns ctx marked as a holding through g, for a combinator's own
// holding (see multilock).
func Mark(ctx context.Context, g *Gate) context.Context { return withMark(ctx, g) }

// WithMarksOf returns ctx carrying, besides its own, the gate marks of
// others: a combinator's holding carries its members', so that a Lock of
// a member with a ctx that descends from it re-enters the member.
func WithMarksOf(ctx context.Context, others ...context.Context) context.Context {
	return &marksCtx{Context: ctx, others: others}
}

type marksCtx struct {
	context.Context
	others []context.Context
}

func (m *marksCtx) Value(key any) any {
	if v := m.Context.Value(key); v != nil {
		return v
	}
	if _, ok := key.(markKey); !ok {
		return nil
	}
	for _, o := range m.others {
		if o == nil {
			continue
		}
		if v := o.Value(key); v != nil {
			return v
		}
	}
	return nil
}

// Join returns a context derived from parent that also ends when holding
// ends (its cause then holding's cause, wrapping ErrLockLost on a loss),
// and that carries holding's gate marks, so that a Lock with it re-enters
// the lock held. Its cancel func releases the resources; call it when done.
func Join(parent, holding context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(WithMarksOf(parent, holding))
	stop := context.AfterFunc(holding, func() { cancel(context.Cause(holding)) })
	return ctx, func() {
		stop()
		cancel(context.Canceled)
	}
}
