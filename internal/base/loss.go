package base

import "errors"

// Causes of a loss: why a holding ended without its owner's last release
// (rlock.LossInfo.Cause). They are stable strings, for metrics and logs.
const (
	LossNotHeldAtRenewal      = "not_held_at_renewal"       // the watchdog found the holds gone
	LossRenewalFailed         = "renewal_failed"            // the watchdog lease ran out while renewals failed
	LossRenewalLate           = "renewal_late"              // the watchdog lease ran out before a renewal was answered
	LossLeaseExpired          = "lease_expired"             // an explicit lease ran out
	LossClientClosed          = "client_closed"             // the client was closed while the lock was held
	LossNotHeldAtUnlock       = "not_held_at_unlock"        // an Unlock found the holds gone
	LossNotHeldAtReentry      = "not_held_at_reentry"       // a re-entry found the holds gone
	LossNotHeldAtSetLease     = "not_held_at_set_lease"     // a SetLease found the holds gone
	LossNotHeldAfterLostReply = "not_held_after_lost_reply" // checking after a lost reply found the holds gone
	LossReleaseFailed         = "release_failed"            // the last release failed: renewal stopped, the lease decides
	LossUnknown               = "unknown"                   // none of the above
)

// lossError is a loss with its cause; it reads as the loss it wraps.
type lossError struct {
	cause string
	err   error
}

func (e *lossError) Error() string { return e.err.Error() }
func (e *lossError) Unwrap() error { return e.err }

// Lost returns err, a loss (wrapping ErrLockLost), marked with its cause
// (one of the Loss constants).
func Lost(cause string, err error) error { return &lossError{cause: cause, err: err} }

// LossCause returns the cause of the loss err: the one Lost marked it
// with, LossClientClosed for a loss that wraps ErrClosed, LossUnknown
// otherwise.
func LossCause(err error) string {
	if e, ok := errors.AsType[*lossError](err); ok {
		return e.cause
	}
	if errors.Is(err, ErrClosed) {
		return LossClientClosed
	}
	return LossUnknown
}
