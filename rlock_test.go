package rlock_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rlock-go/rlock"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestDerivedKeyKeepsTheSlot(t *testing.T) {
	for _, name := range []string{"orders:42", "{user7}:cart", "a{b}c", "x"} {
		for _, p := range []string{rlock.ChannelPrefix, rlock.LatchPrefix, rlock.QueuePrefix, rlock.TimeoutPrefix, rlock.TokenPrefix} {
			require.Equal(t, rlock.Slot(name), rlock.Slot(rlock.DerivedKey(p, name)), "%s %s", p, name)
		}
	}
	require.Equal(t, "redisson_lock__channel:{orders:42}", rlock.Channel("orders:42"))
	require.Equal(t, "redisson_lock__channel:{user7}:cart", rlock.Channel("{user7}:cart"))
}

func TestValidation(t *testing.T) {
	require.NoError(t, rlock.ValidateName("n"))
	require.ErrorIs(t, rlock.ValidateName(""), rlock.ErrInvalidArgument)
	require.ErrorIs(t, rlock.ValidateName(strings.Repeat("n", rlock.MaxNameLen+1)), rlock.ErrInvalidArgument)

	_, ok, err := rlock.OwnerFrom(context.Background())
	require.False(t, ok)
	require.NoError(t, err)
	id, ok, err := rlock.OwnerFrom(rlock.WithOwner(context.Background(), "job-1"))
	require.True(t, ok)
	require.NoError(t, err)
	require.Equal(t, "job-1", id)
	for _, bad := range []string{"", "#3", "a\x00", strings.Repeat("o", rlock.MaxOwnerLen+1)} {
		_, _, err := rlock.OwnerFrom(rlock.WithOwner(context.Background(), bad))
		require.ErrorIs(t, err, rlock.ErrInvalidArgument, "%q", bad)
	}
}
