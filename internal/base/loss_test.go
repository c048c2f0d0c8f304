package base

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLossCause: a marked loss reads as the loss it wraps and keeps its
// cause through further wrapping; a loss by Close without a mark is
// client_closed; anything else is unknown.
func TestLossCause(t *testing.T) {
	inner := fmt.Errorf("%w: lease ran out", ErrLockLost)
	err := Lost(LossLeaseExpired, inner)
	require.Equal(t, inner.Error(), err.Error())
	require.ErrorIs(t, err, ErrLockLost)
	require.Equal(t, LossLeaseExpired, LossCause(fmt.Errorf("multi: %w", err)))
	require.Equal(t, LossClientClosed, LossCause(fmt.Errorf("%w: %w", ErrLockLost, ErrClosed)))
	require.Equal(t, LossUnknown, LossCause(inner))
}
