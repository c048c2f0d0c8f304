package inspect_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/inspect"
	"github.com/rlock-go/rlock/internal/redistest"
)

// A latch's or semaphore's count (a string key) is not a lock, and the
// error says what it looks like, so `rlock unlock --force` refuses it
// clearly.
func TestReadRefusesLatch(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.Universal(t)
		name := redistest.Name(t)
		require.NoError(t, rdb.Set(ctx, name, "3", 0).Err())
		_, err := inspect.Read(ctx, rdb, name, time.Now())
		require.ErrorIs(t, err, inspect.ErrNotALock)
		require.ErrorContains(t, err, "looks like a semaphore's or a count-down latch's count")
	})
}
