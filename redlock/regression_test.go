package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/reentrant"
)

// Regression (issue 12): a nil context made every entry point panic.
func TestNilContextIsAnError(t *testing.T) {
	b := redistest.Mini(t)
	c, err := reentrant.NewClient(b.NewClient(t))
	require.NoError(t, err)
	defer c.Close()
	rl := newRedLock(t, redistest.Name(t), []*reentrant.Client{c})
	var nilCtx context.Context
	require.ErrorIs(t, rl.Lock(nilCtx), rlock.ErrInvalidArgument)
	require.ErrorIs(t, rl.TryLock(nilCtx), rlock.ErrInvalidArgument)
	require.ErrorIs(t, rl.LockLease(nilCtx, time.Second), rlock.ErrInvalidArgument)
	require.ErrorIs(t, rl.TryLockLease(nilCtx, time.Second), rlock.ErrInvalidArgument)
	require.ErrorIs(t, rl.SetLease(nilCtx, time.Second), rlock.ErrInvalidArgument)
	require.ErrorIs(t, rl.Unlock(nilCtx), rlock.ErrInvalidArgument)
}
