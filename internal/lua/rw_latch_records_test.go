package lua_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/lua"
	"github.com/rlock-go/rlock/internal/redistest"
)

// The read-write releases' fast paths search the lock's latch as
// unlock.lua does (TestLatchRecordsMatchWholeAndStayBounded): only a whole
// record is a copy of a release that ran, and the older records are cut to
// the 31 newest once they pass 48, not on every release.
func TestRWLatchRecordsMatchWholeAndStayBounded(t *testing.T) {
	for _, side := range []string{"write", "read"} {
		t.Run(side, func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				r := newRW(t, b, redistest.Name(t))
				latch := base.DerivedKey(base.LatchPrefix, r.name)
				lock := func() {
					t.Helper()
					if side == "write" {
						r.write("a", 0, false)
					} else {
						r.read("a", 0, long)
					}
				}
				unlock := func(request string) {
					t.Helper()
					s, keys, field := lua.RWUnlockRead, []string{r.name, base.RWChannel(r.name), latch}, reader("a")
					if side == "write" {
						s, keys, field = lua.RWUnlockWrite, []string{r.name, base.RWChannel(r.name), latch, r.until("a"), base.RWWaiters(r.name), base.RWReaders(r.name)}, writer("a")
					}
					require.Equal(t, []int64{1, 0}, r.ints(s, keys, long, field, 1, base.ReadUnlockMessage, latchTTL, "c", request, 2))
				}
				held := func() bool {
					n, err := r.rdb.Exists(r.ctx, r.name).Result()
					require.NoError(t, err)
					return n == 1
				}

				require.NoError(t, r.rdb.Set(r.ctx, latch, "\nc:12\nc:100", 0).Err())
				lock()
				unlock("c:12") // a copy of a release that ran
				require.True(t, held(), "a copy of a release that ran changes nothing")
				unlock("c:1") // a prefix of a record, not a record
				require.False(t, held(), "a request that begins another's record releases")
				records, err := r.rdb.Get(r.ctx, latch).Result()
				require.NoError(t, err)
				require.Equal(t, "\nc:1\nc:12\nc:100", records)

				var some strings.Builder // 40 records: not yet long enough to cut
				for i := range 40 {
					fmt.Fprintf(&some, "\nsome:%02d", i)
				}
				require.NoError(t, r.rdb.Set(r.ctx, latch, some.String(), 0).Err())
				lock()
				unlock("new:00")
				records, err = r.rdb.Get(r.ctx, latch).Result()
				require.NoError(t, err)
				require.Equal(t, "\nnew:00"+some.String(), records, "under 48 records, none is cut")

				var old strings.Builder
				for i := range 60 {
					fmt.Fprintf(&old, "\nold:%02d", i)
				}
				require.NoError(t, r.rdb.Set(r.ctx, latch, old.String(), 0).Err())
				lock()
				unlock("new:01")
				records, err = r.rdb.Get(r.ctx, latch).Result()
				require.NoError(t, err)
				require.Equal(t, "\nnew:01"+old.String()[:31*len("\nold:00")], records, "the new record first, then the 31 newest older ones")
				lock()
				unlock("old:30") // the 31st newest older record is still there
				require.True(t, held())
				unlock("old:31") // cut: not a record any more
				require.False(t, held())
			})
		})
	}
}
