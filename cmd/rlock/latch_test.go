package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/redistest"
)

// `rlock unlock --force` and `rlock inspect` refuse a count-down latch's
// (or a Redisson semaphore's) count with a message that says what it looks
// like, and delete nothing.
func TestUnlockForceRefusesLatch(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.NewClient(t)
		name := redistest.Name(t)
		require.NoError(t, rdb.Set(ctx, name, "3", 0).Err())
		for _, args := range [][]string{
			{"unlock", "--force", "--yes", redisURL(b), name},
			{"inspect", redisURL(b), name},
		} {
			code, out, errOut := runBin(t, "", args...)
			require.Equal(t, 1, code, "%v: %s%s", args, out, errOut)
			require.Contains(t, errOut, fmt.Sprintf("not a lock: key %q holds a string: it looks like a semaphore's or a count-down latch's count", name), args)
		}
		require.Equal(t, "3", rdb.Get(ctx, name).Val(), "nothing deleted")
	})
}
