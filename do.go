package rlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/core"
)

// Do runs fn while holding l: it takes l with Lock(ctx), runs fn, and
// releases l when fn returns, also when fn panics (the panic goes on).
//
// fn's ctx derives from ctx and also ends when the holding ends by loss
// (context.Cause then wraps ErrLockLost): stop working when it is done. A
// Lock of l (or, for a MultiLock, of one of its members) with fn's ctx, or
// a context derived from it, re-enters the holding instead of waiting for
// it (see the package documentation on ownership).
//
// If Lock fails, Do returns its error without calling fn. Otherwise it
// returns fn's error joined with the loss, if the holding was lost while
// fn ran, and with the error of the Unlock, which runs even when ctx has
// ended (with ctx's values, without its cancellation). A nil fn is
// ErrInvalidArgument, before any I/O.
func Do(ctx context.Context, l Locker, fn func(ctx context.Context) error) (err error) {
	if fn == nil || core.IsNil(l) {
		return fmt.Errorf("%w: Do needs a lock and a function", base.ErrInvalidArgument)
	}
	g := &core.Grant{}
	if err := l.Lock(core.WithGrant(ctx, g)); err != nil {
		return err
	}
	held := g.Ctx
	if held == nil {
		if h, ok := l.(interface{ Ctx() context.Context }); ok {
			held = h.Ctx()
		}
	}
	inner, cancel := ctx, context.CancelFunc(func() {})
	if held != nil {
		inner, cancel = core.Join(ctx, held)
	}
	defer func() {
		cancel()
		uerr := l.Unlock(context.WithoutCancel(ctx))
		if held != nil && held.Err() != nil {
			if cause := context.Cause(held); errors.Is(cause, ErrLockLost) && !errors.Is(uerr, ErrLockLost) {
				err = errors.Join(err, cause)
			}
		}
		err = errors.Join(err, uerr)
	}()
	return fn(inner)
}
