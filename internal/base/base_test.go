package base_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rlock-go/rlock/internal/base"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestDerivedKeyKeepsTheSlot(t *testing.T) {
	for _, name := range []string{"orders:42", "{user7}:cart", "a{b}c", "x"} {
		for _, p := range []string{base.ChannelPrefix, base.LatchPrefix, base.QueuePrefix, base.TimeoutPrefix, base.TokenPrefix, base.WaitersPrefix} {
			require.Equal(t, base.Slot(name), base.Slot(base.DerivedKey(p, name)), "%s %s", p, name)
		}
	}
	require.Equal(t, "redisson_lock__channel:{orders:42}", base.Channel("orders:42"))
	require.Equal(t, "redisson_lock__channel:{user7}:cart", base.Channel("{user7}:cart"))
}

func TestValidation(t *testing.T) {
	require.NoError(t, base.ValidateName("n"))
	require.ErrorIs(t, base.ValidateName(""), base.ErrInvalidArgument)
	require.ErrorIs(t, base.ValidateName(strings.Repeat("n", base.MaxNameLen+1)), base.ErrInvalidArgument)

	_, ok, err := base.OwnerFrom(context.Background())
	require.False(t, ok)
	require.NoError(t, err)
	id, ok, err := base.OwnerFrom(base.WithOwner(context.Background(), "job-1"))
	require.True(t, ok)
	require.NoError(t, err)
	require.Equal(t, "job-1", id)
	for _, bad := range []string{"", "#3", "a\x00", strings.Repeat("o", base.MaxOwnerLen+1)} {
		_, _, err := base.OwnerFrom(base.WithOwner(context.Background(), bad))
		require.ErrorIs(t, err, base.ErrInvalidArgument, "%q", bad)
	}
}

// ChannelLocks inverts Channel: every lock name is among the names of its
// channel.
func TestChannelLocks(t *testing.T) {
	for _, name := range []string{"x", "{x}", "a{b}c", "{a}b", "lock:1"} {
		require.Contains(t, base.ChannelLocks(base.Channel(name)), name)
	}
	require.Equal(t, []string{"x", "{x}"}, base.ChannelLocks(base.Channel("x")))
	require.Equal(t, []string{"a{b}c"}, base.ChannelLocks(base.Channel("a{b}c")))
	require.Nil(t, base.ChannelLocks("redisson_rwlock:{x}"))
}

// RWChannelLocks inverts RWChannel as ChannelLocks inverts Channel, and
// the read-write lock's registries and until keys keep the lock's slot.
func TestRWChannelLocks(t *testing.T) {
	for _, name := range []string{"x", "{x}", "a{b}c", "{a}b", "lock:1"} {
		require.Contains(t, base.RWChannelLocks(base.RWChannel(name)), name)
		for _, key := range []string{base.RWWaiters(name), base.RWReaders(name), base.RWUntilKey(name, "c:1:write")} {
			require.Equal(t, base.Slot(name), base.Slot(key), "%s %s", key, name)
		}
	}
	require.Equal(t, []string{"x", "{x}"}, base.RWChannelLocks(base.RWChannel("x")))
	require.Equal(t, "{x}:c:1:write:rwlock_until", base.RWUntilKey("x", "c:1:write"))
	require.Nil(t, base.RWChannelLocks(base.Channel("x")))
}
