package lua_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/lua"
	"github.com/rlock-go/rlock/internal/redistest"
)

// snapshot renders keys' types and contents, to tell whether a script
// changed any of them.
func snapshot(t *testing.T, rdb *redis.Client, keys []string) string {
	t.Helper()
	ctx := context.Background()
	out := ""
	for _, k := range keys {
		typ := rdb.Type(ctx, k).Val()
		var v any
		switch typ {
		case "string":
			v = rdb.Get(ctx, k).Val()
		case "hash":
			v = rdb.HGetAll(ctx, k).Val()
		case "zset":
			v = rdb.ZRangeWithScores(ctx, k, 0, -1).Val()
		case "list":
			v = rdb.LRange(ctx, k, 0, -1).Val()
		}
		out += fmt.Sprintf("%s %s %v\n", k, typ, v)
	}
	return out
}

// The semaphore and latch scripts have no lease behind them: a permit
// taken, returned or reclaimed by a script that Redis then stopped with an
// error (it keeps the writes made before) is counted for ever, while the
// caller was told of an error. Each case here made a write before a call
// that failed: a waiters' registry of another type (sem_acquire after
// DECRBY, sem_release, sem_add, sem_set and sem_cancel after INCRBY or SET;
// sem_cancel failed after giving the permits back, without marking the
// acquire given back),
// a counter that sem_count took for an integer but INCRBY and DECRBY do
// not ("5.0"), a counter of another type met when reclaiming expired
// permits after their ZREM (exp_lease), a cancel mark recorded before the
// permit's timeout set was read (exp_release), and a latch count beyond a
// 64-bit integer met by DECR after the call was recorded. Now every call
// that can fail comes before the script's first write: the script
// refuses, and nothing changes (sem_cancel, a repair, is not refused: it
// gives the permits back without designations). The "counter-5.0" cases of sem_acquire and
// sem_release passed before (their DECRBY or INCRBY was the first write);
// they guard the new order (sem_acquire's ZREM before its DECRBY) and the
// stricter sem_count. miniredis keeps partial writes as Redis does, but
// its DECR takes 9999999999999999999, so the latch case fails before only
// on redis-server.
func TestSemaphoreAndLatchScriptsFailingAfterAWrite(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.NewClient(t)
		now := strconv.FormatInt(time.Now().UnixMilli(), 10)
		past := strconv.FormatInt(time.Now().Add(-time.Minute).UnixMilli(), 10)
		laterMs := float64(time.Now().Add(time.Hour).UnixMilli())
		later := strconv.FormatInt(int64(laterMs), 10)
		for _, tc := range []struct {
			name   string
			script *redis.Script
			keys   func(n string) []string // the call's KEYS
			setup  func(n string)
			args   []any
			check  func(t *testing.T, n string, res any, err error) // in place of "nothing changed"
		}{
			{"sem_acquire/registry", lua.SemAcquire, func(n string) []string { return []string{n, n + ":ops", n + ":w"} },
				func(n string) { rdb.Set(ctx, n, "5", 0); rdb.Set(ctx, n+":w", "x", 0) },
				[]any{1, "op1", 60000, "tag", 5000, "1"}, nil},
			{"sem_acquire/counter-5.0", lua.SemAcquire, func(n string) []string { return []string{n, n + ":ops", n + ":w"} },
				func(n string) { rdb.Set(ctx, n, "5.0", 0); rdb.ZAdd(ctx, n+":w", redis.Z{Score: 1e15, Member: "tag"}) },
				[]any{1, "op1", 60000, "tag", 5000, "1"}, nil},
			{"sem_release/registry", lua.SemRelease, func(n string) []string { return []string{n, n + ":ch", n + ":ops", n + ":w"} },
				func(n string) { rdb.Set(ctx, n, "0", 0); rdb.Set(ctx, n+":w", "x", 0) },
				[]any{1, "op1", 60000, "c"}, nil},
			{"sem_release/counter-5.0", lua.SemRelease, func(n string) []string { return []string{n, n + ":ch", n + ":ops", n + ":w"} },
				func(n string) { rdb.Set(ctx, n, "5.0", 0) },
				[]any{1, "op1", 60000, "c"}, nil},
			{"sem_add/registry", lua.SemAdd, func(n string) []string { return []string{n, n + ":ch", n + ":ops", n + ":w"} },
				func(n string) { rdb.Set(ctx, n, "0", 0); rdb.Set(ctx, n+":w", "x", 0) },
				[]any{2, "op1", 60000, "c"}, nil},
			{"sem_set/registry", lua.SemSet, func(n string) []string { return []string{n, n + ":ch", n + ":ops", n + ":w"} },
				func(n string) { rdb.Set(ctx, n+":w", "x", 0) },
				[]any{3, "op1", 60000, "c"}, nil},
			{"sem_cancel/registry", lua.SemCancel, func(n string) []string { return []string{n, n + ":ch", n + ":ops", n + ":w"} },
				func(n string) {
					rdb.Set(ctx, n, "0", 0)
					rdb.ZAdd(ctx, n+":ops", redis.Z{Score: 1e15, Member: "op1"})
					rdb.Set(ctx, n+":w", "x", 0)
				},
				[]any{1, "op1", 60000, "c"},
				// A cancel is not refused: it gives the permit back and
				// marks the acquire, without designations.
				func(t *testing.T, n string, res any, err error) {
					require.NoError(t, err)
					require.Equal(t, int64(1), res)
					require.Equal(t, "1", rdb.Get(ctx, n).Val())
					require.NoError(t, rdb.ZScore(ctx, n+":ops", "op1!").Err())
				}},
			{"exp_lease/counter", lua.ExpLease, func(n string) []string { return []string{n, n + ":timeout", n + ":ch", n + ":w"} },
				func(n string) {
					rdb.HSet(ctx, n, "f", "1")
					rdb.ZAdd(ctx, n+":timeout", redis.Z{Score: 1, Member: "gone"}, redis.Z{Score: 1e15, Member: "p"})
				},
				[]any{"p", now, "922337203685477", "c"}, nil},
			{"exp_release/cancel-timeout", lua.ExpRelease, func(n string) []string { return []string{n, n + ":ch", n + ":timeout", n + ":ops", n + ":w"} },
				func(n string) { rdb.Set(ctx, n, "0", 0); rdb.Set(ctx, n+":timeout", "x", 0) },
				[]any{"p", now, "c", 60000, "70", "cancel", "op1"}, nil},
			{"exp_release/counter-5.0", lua.ExpRelease, func(n string) []string { return []string{n, n + ":ch", n + ":timeout", n + ":ops", n + ":w"} },
				func(n string) {
					rdb.Set(ctx, n, "5.0", 0)
					rdb.ZAdd(ctx, n+":timeout", redis.Z{Score: 1e15, Member: "p"})
				},
				[]any{"p", now, "c", 60000, "70", "", "op1"}, nil},
			{"exp_acquire/counter-5.0", lua.ExpAcquire, func(n string) []string {
				return []string{n, n + ":timeout", n + ":ch", n + ":ops", n + ":w", n + ":watch"}
			},
				func(n string) {
					rdb.Set(ctx, n, "5.0", 0)
					rdb.ZAdd(ctx, n+":timeout", redis.Z{Score: 1, Member: "gone"})
				},
				[]any{"p", "1000000000000000", past, "922337203685477", "c", "op1", "7", 5000, "1"}, nil},
			// The expirable semaphore's registry of waiting clients and
			// its expiry watch are written or read after the script's
			// first write (designations after a release or a reclaim,
			// registration after a refused reclaiming attempt, the watch
			// claimed after it): one of another type is refused before any
			// write (a release, a waiting acquire), or passed over without
			// designations (a give-back, a reclaim by a query, the watch).
			{"exp_release/registry", lua.ExpRelease, func(n string) []string { return []string{n, n + ":ch", n + ":timeout", n + ":ops", n + ":w"} },
				func(n string) {
					rdb.Set(ctx, n, "0", 0)
					rdb.ZAdd(ctx, n+":timeout", redis.Z{Score: laterMs, Member: "p"})
					rdb.Set(ctx, n+":w", "x", 0)
				},
				[]any{"p", now, "c", 60000, "70", "", "op1"}, nil},
			{"exp_release/cancel-registry", lua.ExpRelease, func(n string) []string { return []string{n, n + ":ch", n + ":timeout", n + ":ops", n + ":w"} },
				func(n string) {
					rdb.Set(ctx, n, "0", 0)
					rdb.ZAdd(ctx, n+":timeout", redis.Z{Score: laterMs, Member: "p"})
					rdb.Set(ctx, n+":w", "x", 0)
				},
				[]any{"p", now, "c", 60000, "70", "cancel", "op1"},
				func(t *testing.T, n string, res any, err error) {
					require.NoError(t, err)
					require.Equal(t, "1", rdb.Get(ctx, n).Val(), "the permit went back")
					require.Zero(t, rdb.ZCard(ctx, n+":timeout").Val())
					require.NoError(t, rdb.ZScore(ctx, n+":ops", "70!").Err(), "the acquire is marked given back")
				}},
			{"exp_state/reclaim-registry", lua.ExpState, func(n string) []string { return []string{n, n + ":timeout", n + ":ch", n + ":w"} },
				func(n string) {
					rdb.Set(ctx, n, "0", 0)
					rdb.ZAdd(ctx, n+":timeout", redis.Z{Score: 1, Member: "gone"})
					rdb.Set(ctx, n+":w", "x", 0)
				},
				[]any{now, "c"},
				func(t *testing.T, n string, res any, err error) {
					require.NoError(t, err)
					require.Equal(t, []any{int64(1), int64(0)}, res, "the expired permit was reclaimed")
					require.Equal(t, "x", rdb.Get(ctx, n+":w").Val())
				}},
			{"exp_acquire/waiting-registry", lua.ExpAcquire, func(n string) []string {
				return []string{n, n + ":timeout", n + ":ch", n + ":ops", n + ":w", n + ":watch"}
			},
				func(n string) {
					rdb.Set(ctx, n, "0", 0)
					rdb.ZAdd(ctx, n+":timeout", redis.Z{Score: 1, Member: "gone"}, redis.Z{Score: laterMs, Member: "q"})
					rdb.Set(ctx, n+":w", "x", 0)
				},
				[]any{"p", later, now, "922337203685477", "c", "op1", "7", 5000, "1"}, nil},
			{"exp_acquire/reclaim-registry", lua.ExpAcquire, func(n string) []string {
				return []string{n, n + ":timeout", n + ":ch", n + ":ops", n + ":w", n + ":watch"}
			},
				func(n string) {
					rdb.Set(ctx, n, "0", 0)
					rdb.ZAdd(ctx, n+":timeout", redis.Z{Score: 1, Member: "gone"})
					rdb.Set(ctx, n+":w", "x", 0)
				},
				[]any{"p", later, now, "922337203685477", "c", "op1", "7", 5000, "0"},
				func(t *testing.T, n string, res any, err error) {
					require.NoError(t, err)
					require.Equal(t, int64(1), res.([]any)[0], "granted from the reclaimed permit")
				}},
			{"exp_acquire/watch", lua.ExpAcquire, func(n string) []string {
				return []string{n, n + ":timeout", n + ":ch", n + ":ops", n + ":w", n + ":watch"}
			},
				func(n string) {
					rdb.Set(ctx, n, "0", 0)
					rdb.ZAdd(ctx, n+":timeout", redis.Z{Score: laterMs, Member: "q"})
					rdb.HSet(ctx, n+":watch", "f", "1")
				},
				[]any{"p", later, now, "922337203685477", "c", "op1", "7", 5000, "1"},
				func(t *testing.T, n string, res any, err error) {
					require.NoError(t, err)
					require.Equal(t, []any{int64(0), int64(laterMs), int64(1)}, res, "refused, registered, watching")
					require.Equal(t, later+":7", rdb.Get(ctx, n+":watch").Val())
				}},
			{"exp_watch/registry", lua.ExpWatch, func(n string) []string { return []string{n, n + ":timeout", n + ":ch", n + ":w", n + ":watch"} },
				func(n string) {
					rdb.Set(ctx, n, "0", 0)
					rdb.ZAdd(ctx, n+":timeout", redis.Z{Score: 1, Member: "gone"})
					rdb.Set(ctx, n+":w", "x", 0)
					rdb.Set(ctx, n+":watch", "1:7", 0)
				},
				[]any{now, "c", "7", 5000, "922337203685477"},
				func(t *testing.T, n string, res any, err error) {
					require.NoError(t, err)
					require.Equal(t, int64(-1), res)
					require.Equal(t, "1", rdb.Get(ctx, n).Val(), "the expired permit was reclaimed")
					require.Zero(t, rdb.Exists(ctx, n+":watch").Val(), "the watch ended")
				}},
			{"latch_count_down/beyond-int64", lua.LatchCountDown, func(n string) []string { return []string{n, n + ":ch", n + ":ops"} },
				func(n string) { rdb.Set(ctx, n, "9999999999999999999", 0) },
				[]any{"op1", 60000, "c"}, nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				name := "{" + redistest.Name(t) + "}"
				keys := tc.keys(name)
				tc.setup(name)
				before := snapshot(t, rdb, keys)
				res, err := tc.script.Run(ctx, rdb, keys, tc.args...).Result()
				if tc.check != nil {
					tc.check(t, name, res, err)
					return
				}
				after := snapshot(t, rdb, keys)
				require.Equal(t, before, after, "the script replied %v, %v", res, err)
				if err == nil {
					t.Logf("refused without an error reply: %v", res)
				}
			})
		}
	})
}
