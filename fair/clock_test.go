package fair_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/lua"
	"github.com/rlock-go/rlock/internal/redistest"
)

// TestReleaseDropsOnlyByTheServerClock: a release takes the head for
// alive by its client's clock only when the head's deadline lies more
// than a third of the queue timeout past it (issue 30: it spares the
// server's TIME). Whatever the client's clock says, a live head is never
// dropped, and a dead one is dropped unless that clock is more than T/3
// behind the server's; then it is woken instead, and the next attempt that
// finds the lock free drops it. The release script is run directly, with
// the client's clock an hour ahead, right, or an hour behind.
func TestReleaseDropsOnlyByTheServerClock(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const T = 30 * time.Second
		for _, tc := range []struct {
			name      string
			headAlive bool
			skew      time.Duration // client clock minus server clock
			dropped   bool
		}{
			{"live head, client ahead", true, time.Hour, false},
			{"live head, client right", true, 0, false},
			{"live head, client behind", true, -time.Hour, false},
			{"dead head, client ahead", false, time.Hour, true},
			{"dead head, client right", false, 0, true},
			{"dead head, client behind", false, -time.Hour, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ctx := context.Background()
				rdb := b.Universal(t)
				name := redistest.Name(t)
				queue := base.DerivedKey(base.QueuePrefix, name)
				scores := base.DerivedKey(base.TimeoutPrefix, name)
				alive := scores + ":rlock"
				now := int64(serverNow(t, rdb))
				headDeadline := now - time.Second.Milliseconds() // dead
				if tc.headAlive {
					headDeadline = now + (2 * T / 3).Milliseconds() // as right after a poll a third of T ago
				}
				require.NoError(t, rdb.HSet(ctx, name, "c:holder", 1).Err())
				require.NoError(t, rdb.PExpire(ctx, name, time.Minute).Err())
				require.NoError(t, rdb.RPush(ctx, queue, "c:head", "c:next").Err())
				require.NoError(t, rdb.ZAdd(ctx, scores,
					redis.Z{Score: float64(now + time.Hour.Milliseconds()), Member: "c:head"},
					redis.Z{Score: float64(now + 2*time.Hour.Milliseconds()), Member: "c:next"}).Err())
				require.NoError(t, rdb.HSet(ctx, alive, "c:head", headDeadline, "c:next", now+T.Milliseconds()).Err())

				clientNow := now + tc.skew.Milliseconds()
				res, err := lua.FairUnlock.Run(ctx, rdb, []string{name, queue, scores, name + ":latch", alive},
					time.Minute.Milliseconds(), "c:holder", 1, base.UnlockMessage, time.Minute.Milliseconds(),
					base.Channel(name), "c", "req-1", clientNow+(T/3).Milliseconds()).Result()
				require.NoError(t, err)
				require.EqualValues(t, []any{int64(1), int64(0)}, res, "released")
				want := []string{"c:head", "c:next"}
				if tc.dropped {
					want = want[1:]
				}
				require.Equal(t, want, rdb.LRange(ctx, queue, 0, -1).Val())
				if tc.headAlive || tc.dropped {
					return
				}
				// Woken though dead: the next attempt that finds the lock
				// free drops it, by the server's clock.
				res, err = lua.FairLock.Run(ctx, rdb, []string{name, queue, scores, name + ":token", alive},
					time.Minute.Milliseconds(), "c:other", 0, "0", T.Milliseconds(), "0",
					base.Channel(name), base.UnlockMessage, "c", 300000, strconv.FormatInt(clientNow, 10)).Result()
				require.NoError(t, err)
				require.Equal(t, int64(0), res.([]any)[0], "not granted: c:next is first")
				require.Equal(t, []string{"c:next"}, rdb.LRange(ctx, queue, 0, -1).Val())
			})
		}
	})
}
