package rlock

import (
	"context"
	"sync"
)

// NewLocker returns l as a sync.Locker, for code that takes one (as etcd's
// concurrency.NewLocker does). Its Lock and Unlock call l's with
// context.Background(), so Lock waits until it holds l, or until Redis has
// been unreachable for the client's unreachable timeout (see
// WithUnreachableTimeout).
//
// A sync.Locker cannot return errors, so both methods panic with the error
// instead (recover to handle it): Lock when it could not take the lock
// (Redis unreachable, a closed client, a key of another type), Unlock when
// the release failed or found the lock no longer held, which means the
// critical section may have run unprotected (the error then wraps
// ErrNotHeld or ErrLockLost). Goroutines that share the Locker exclude each
// other, as with sync.Mutex; it cannot re-enter. For the holding's loss
// while it is held, use l's Done, Err or Ctx, or Do.
func NewLocker(l Locker) sync.Locker { return syncLocker{l} }

type syncLocker struct{ l Locker }

func (s syncLocker) Lock() {
	if err := s.l.Lock(context.Background()); err != nil {
		panic(err)
	}
}

func (s syncLocker) Unlock() {
	if err := s.l.Unlock(context.Background()); err != nil {
		panic(err)
	}
}
