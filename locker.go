package rlock

import "context"

// Locker is what every rlock lock kind implements, so that a MultiLock can
// combine locks of any kind. All methods take a context first and touch the
// network.
type Locker interface {
	// Lock blocks until the lock is acquired or ctx ends; on ctx's end it
	// returns ctx's error and holds nothing.
	Lock(ctx context.Context) error
	// TryLock makes one attempt; ErrNotObtained if another owner holds it.
	TryLock(ctx context.Context) error
	// Unlock releases one hold; ErrNotHeld if the owner holds none.
	Unlock(ctx context.Context) error
	// Name is the lock's name (its Redis key).
	Name() string
}
