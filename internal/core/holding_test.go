package core

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/base"
)

// Err came back to nil after reporting a loss: once an explicit lease's
// end had passed (Err non-nil) but before its timer ended the holding, a
// SetLease or re-entry whose reply said the lock was held moved the end on
// and revived the holding. A holding whose protection has passed stays
// lost, whatever a later call moves.
func TestErrNeverReturnsToNilAfterLeasePassed(t *testing.T) {
	for _, move := range []struct {
		name string
		do   func(hp *holding)
	}{
		{"later lease", func(hp *holding) { hp.expireAt(time.Now().Add(time.Hour), func() {}) }},
		{"watchdog", func(hp *holding) { hp.keepAlive() }},
	} {
		t.Run(move.name, func(t *testing.T) {
			hp := newHolding(0)
			// The lease ended a moment ago; its timer has not fired yet.
			hp.expireAt(time.Now().Add(-time.Millisecond), func() {})
			first := hp.err()
			require.ErrorIs(t, first, base.ErrLockLost)

			move.do(hp)
			require.ErrorIs(t, hp.err(), base.ErrLockLost, "the holding came back after its loss was reported")
			select {
			case <-hp.done():
			default:
				t.Fatal("Done stays open for a holding whose loss Err reported")
			}
			require.True(t, errors.Is(context.Cause(hp.ctx), base.ErrLockLost), "Ctx is cancelled with the loss")
		})
	}
}
