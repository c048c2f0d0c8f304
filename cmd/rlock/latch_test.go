package main

import (
	"context"
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
			require.Contains(t, errOut, "not a lock: "+name+" looks like a semaphore/latch", args)
		}
		require.Equal(t, "3", rdb.Get(ctx, name).Val(), "nothing deleted")
	})
}
