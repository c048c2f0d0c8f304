package lua_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/lua"
	"github.com/rlock-go/rlock/internal/redistest"
)

// The latch search takes a record for this request only where a whole
// record matches: a request whose ID begins another record's ("c:1"
// against "c:12") is not a copy, and releases; the whole ID is. Each
// release that is not a copy puts its record first and keeps the older
// ones, cut to the 31 newest once they are long (see set_latch).
func TestLatchRecordsMatchWholeAndStayBounded(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.NewClient(t)
		name := redistest.Name(t)
		latch := base.DerivedKey(base.LatchPrefix, name)
		const field = "client:1"
		lock := func() {
			t.Helper()
			require.NoError(t, lua.Lock.Run(ctx, rdb, []string{name, base.DerivedKey(base.TokenPrefix, name)}, 10000, field, 0, "0").Err())
		}
		unlock := func(request string) {
			t.Helper()
			reply, err := lua.ReleaseReply(lua.Unlock.Run(ctx, rdb, []string{name, base.Channel(name), latch, base.Waiters(name)},
				10000, field, 1, base.UnlockMessage, 60000, "c", request, 2))
			require.NoError(t, err)
			require.Equal(t, []int64{1, 0}, reply)
		}
		held := func() bool {
			n, err := rdb.Exists(ctx, name).Result()
			require.NoError(t, err)
			return n == 1
		}

		require.NoError(t, rdb.Set(ctx, latch, "\nc:12\nc:100", 0).Err())
		lock()
		unlock("c:12") // a copy of a release that ran
		require.True(t, held(), "a copy of a release that ran changes nothing")
		unlock("c:1") // a prefix of a record, not a record
		require.False(t, held(), "a request that begins another's record releases")
		records, err := rdb.Get(ctx, latch).Result()
		require.NoError(t, err)
		require.Equal(t, "\nc:1\nc:12\nc:100", records)

		var old strings.Builder
		for i := range 60 {
			fmt.Fprintf(&old, "\nold:%02d", i)
		}
		require.NoError(t, rdb.Set(ctx, latch, old.String(), 0).Err())
		lock()
		unlock("new:01")
		records, err = rdb.Get(ctx, latch).Result()
		require.NoError(t, err)
		want := "\nnew:01" + old.String()[:31*len("\nold:00")]
		require.Equal(t, want, records, "the new record first, then the 31 newest older ones")
		lock()
		unlock("old:30") // the 31st newest older record is still there
		require.True(t, held())
		unlock("old:31") // cut: not a record any more
		require.False(t, held())
	})
}
