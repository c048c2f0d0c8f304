package base

import (
	"context"
	"fmt"
	"time"
)

// WatchdogMode, given as a lease, asks for watchdog mode: the lock gets the
// watchdog lease (30 s by default) and the client's watchdog renews it for
// as long as it is held.
const WatchdogMode time.Duration = 0

// CheckLease rejects a lease that is neither WatchdogMode nor at least
// 1 ms.
func CheckLease(d time.Duration) error {
	if d != WatchdogMode && d < time.Millisecond {
		return fmt.Errorf("%w: lease %v is neither rlock.WatchdogMode (0) nor at least 1ms", ErrInvalidArgument, d)
	}
	return nil
}

// CheckContext rejects a nil ctx.
func CheckContext(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	return nil
}
