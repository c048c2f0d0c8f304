package lua_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/lua"
	"github.com/rlock-go/rlock/internal/redistest"
)

// The read-write-lock scripts, run directly through go-redis: the contract
// each documents at its top, on miniredis, a real redis-server and a Redis
// Cluster.

const (
	long       = int64(60_000) // a lease that does not run out during a test
	writerWait = int64(10_000) // writer-wait timeout
	latchTTL   = int64(60_000)
)

// rw drives the scripts of one read-write lock.
type rw struct {
	t    *testing.T
	ctx  context.Context
	rdb  redis.UniversalClient
	name string
	reqs int
}

func newRW(t *testing.T, b *redistest.Backend, name string) *rw {
	return &rw{t: t, ctx: context.Background(), rdb: b.Universal(t), name: name}
}

func reader(id string) string { return "client-" + id + ":1" }
func writer(id string) string { return base.WriterField(reader(id)) }

func (r *rw) ints(s *redis.Script, keys []string, args ...any) []int64 {
	r.t.Helper()
	cmd := s.Run(r.ctx, r.rdb, keys, args...)
	read := lua.AcquireReply // a fast path's bare 1: a grant of one hold
	if s == lua.RWUnlockRead || s == lua.RWUnlockWrite {
		read = lua.ReleaseReply
	}
	res, err := read(cmd)
	require.NoError(r.t, err)
	return res
}

func (r *rw) until(id string) string { return base.RWUntilKey(r.name, writer(id)) }

func (r *rw) token() string { return base.DerivedKey(base.TokenPrefix, r.name) }
func (r *rw) wait() string  { return base.WriterWait(r.name) }
func (r *rw) latch(req string) string {
	return base.DerivedKey(base.LatchPrefix, r.name) + ":" + req
}

// newReq returns a fresh request id for a release.
func (r *rw) newReq() string {
	r.reqs++
	return "req" + strconv.Itoa(r.reqs)
}

func (r *rw) read(id string, sent, lease int64) []int64 {
	r.t.Helper()
	return r.ints(lua.RWReadLock, []string{r.name, r.wait()}, lease, reader(id), sent, writer(id))
}

func (r *rw) write(id string, sent int64, join bool) []int64 {
	r.t.Helper()
	j := "0"
	if join {
		j = "1"
	}
	return r.ints(lua.RWWriteLock, []string{r.name, r.token(), r.wait(), r.until(id)},
		long, writer(id), sent, "1", reader(id), writerWait, j)
}

func (r *rw) writeWait(id string, wait int64) []int64 {
	r.t.Helper()
	return r.ints(lua.RWWriteLock, []string{r.name, r.token(), r.wait(), r.until(id)},
		long, writer(id), 0, "1", reader(id), wait, "1")
}

func (r *rw) unlockRead(id string, sent int64, req string) []int64 {
	r.t.Helper()
	return r.ints(lua.RWUnlockRead, []string{r.name, base.RWChannel(r.name), r.latch(req)},
		long, reader(id), sent, base.UnlockMessage, latchTTL)
}

func (r *rw) unlockWrite(id string, sent int64, req string) []int64 {
	r.t.Helper()
	return r.ints(lua.RWUnlockWrite, []string{r.name, base.RWChannel(r.name), r.latch(req), r.until(id), base.RWWaiters(r.name), base.RWReaders(r.name)},
		long, writer(id), sent, base.ReadUnlockMessage, latchTTL)
}

func (r *rw) leave(id string) int64 {
	r.t.Helper()
	n, err := lua.RWLeave.Run(r.ctx, r.rdb, []string{r.name, r.wait(), base.RWChannel(r.name)},
		writer(id), base.ReadUnlockMessage).Int64()
	require.NoError(r.t, err)
	return n
}

func (r *rw) force(req, mode string, holders ...string) int64 {
	r.t.Helper()
	args := []any{base.ReadUnlockMessage, latchTTL, mode, "c"}
	if len(holders) > 0 {
		args = append(args, holders[0])
	}
	n, err := lua.RWForceUnlock.Run(r.ctx, r.rdb, []string{r.name, base.RWChannel(r.name), r.latch(req)}, args...).Int64()
	require.NoError(r.t, err)
	return n
}

func (r *rw) hash() map[string]string {
	r.t.Helper()
	h, err := r.rdb.HGetAll(r.ctx, r.name).Result()
	require.NoError(r.t, err)
	return h
}

func (r *rw) timeoutKey(id string, n int64) string { return base.RWTimeoutKey(r.name, reader(id), n) }

func (r *rw) exists(key string) bool {
	r.t.Helper()
	n, err := r.rdb.Exists(r.ctx, key).Result()
	require.NoError(r.t, err)
	return n == 1
}

func (r *rw) pttl(key string) time.Duration {
	r.t.Helper()
	d, err := r.rdb.PTTL(r.ctx, key).Result()
	require.NoError(r.t, err)
	return d
}

// messages subscribes to the lock's channel; next returns the next
// message. A test that expects no message publishes a marker of its own
// and checks that it comes first.
type messages struct {
	r  *rw
	ps *redis.PubSub
	ch <-chan *redis.Message
}

func (r *rw) subscribe() *messages {
	r.t.Helper()
	ps := r.rdb.Subscribe(r.ctx, base.RWChannel(r.name))
	r.t.Cleanup(func() { _ = ps.Close() })
	_, err := ps.Receive(r.ctx) // the confirmation
	require.NoError(r.t, err)
	return &messages{r: r, ps: ps, ch: ps.Channel()}
}

func (m *messages) next() string {
	m.r.t.Helper()
	select {
	case msg := <-m.ch:
		return msg.Payload
	case <-time.After(10 * time.Second): // a failure bound, not synchronisation
		m.r.t.Fatal("no message on the channel")
		return ""
	}
}

// none checks that nothing was published since the last message.
func (m *messages) none() {
	m.r.t.Helper()
	require.NoError(m.r.t, m.r.rdb.Publish(m.r.ctx, base.RWChannel(m.r.name), "marker").Err())
	require.Equal(m.r.t, "marker", m.next())
}

func eachRW(t *testing.T, fn func(t *testing.T, r *rw)) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		fn(t, newRW(t, b, redistest.Name(t)))
	})
}

func acquired(holds, token int64) []int64 { return []int64{1, holds, token} }

func blocked(t *testing.T, res []int64) {
	t.Helper()
	require.Len(t, res, 2, "reply %v", res)
	require.Equal(t, int64(0), res[0], "reply %v", res)
}

// blockedForWriter checks a reader's refusal from a free lock kept for
// waiting writers: {0, wait, 1}.
func blockedForWriter(t *testing.T, res []int64) {
	t.Helper()
	require.Len(t, res, 3, "reply %v", res)
	require.Equal(t, int64(0), res[0], "reply %v", res)
	require.Equal(t, int64(1), res[2], "reply %v", res)
}

func TestRWReadersShare(t *testing.T) {
	eachRW(t, func(t *testing.T, r *rw) {
		require.Equal(t, acquired(1, 0), r.read("a", 0, long))
		require.Equal(t, acquired(1, 0), r.read("b", 0, 30_000))
		require.Equal(t, map[string]string{"mode": "read", reader("a"): "1", reader("b"): "1"}, r.hash())
		for _, id := range []string{"a", "b"} {
			require.True(t, r.exists(r.timeoutKey(id, 1)))
		}
		require.Greater(t, r.pttl(r.timeoutKey("a", 1)), 30*time.Second)
		require.LessOrEqual(t, r.pttl(r.timeoutKey("b", 1)), 30*time.Second)
		require.Greater(t, r.pttl(r.name), 30*time.Second, "the hash covers the longest read lease")
	})
}

func TestRWWriterExcludes(t *testing.T) {
	eachRW(t, func(t *testing.T, r *rw) {
		res := r.write("w", 0, false)
		require.Equal(t, acquired(1, res[2]), res)
		require.Positive(t, res[2], "a write grant carries a fencing token")
		require.Equal(t, map[string]string{"mode": "write", writer("w"): "1"}, r.hash())
		blocked(t, r.read("a", 0, long))
		blocked(t, r.write("v", 0, true))
		require.False(t, r.exists(r.wait()), "a writer blocked by a writer does not keep readers out")
		require.Equal(t, []int64{1, 0}, r.unlockWrite("w", 1, r.newReq()))
		require.False(t, r.exists(r.name))

		// Readers exclude writers.
		require.Equal(t, acquired(1, 0), r.read("a", 0, long))
		res = r.write("w", 0, false)
		blocked(t, res)
		require.Greater(t, res[1], int64(50_000), "a blocked writer learns the hash's PTTL")
	})
}

func TestRWReentrancy(t *testing.T) {
	eachRW(t, func(t *testing.T, r *rw) {
		require.Equal(t, acquired(1, 0), r.read("a", 0, long))
		require.Equal(t, acquired(2, 0), r.read("a", 1, long))
		require.Equal(t, acquired(3, 0), r.read("a", 2, long))
		for n := int64(1); n <= 3; n++ {
			require.True(t, r.exists(r.timeoutKey("a", n)))
		}
		require.Equal(t, []int64{0, 2}, r.unlockRead("a", 3, r.newReq()))
		require.False(t, r.exists(r.timeoutKey("a", 3)), "releasing hold n deletes its timeout key")
		require.True(t, r.exists(r.timeoutKey("a", 2)))
		require.Equal(t, []int64{0, 1}, r.unlockRead("a", 2, r.newReq()))
		require.Equal(t, []int64{1, 0}, r.unlockRead("a", 1, r.newReq()))
		require.False(t, r.exists(r.name))
		require.False(t, r.exists(r.timeoutKey("a", 1)))

		first := r.write("w", 0, false)
		require.Equal(t, acquired(2, first[2]), r.write("w", 1, false), "a re-entry keeps the token")
		require.Equal(t, []int64{0, 1}, r.unlockWrite("w", 2, r.newReq()))
		require.Equal(t, []int64{1, 0}, r.unlockWrite("w", 1, r.newReq()))
		require.Equal(t, []int64{-1, 0}, r.unlockWrite("w", 1, r.newReq()), "not held")
		require.Equal(t, []int64{-1, 0}, r.unlockRead("a", 1, r.newReq()), "not held")
	})
}

func TestRWDowngrade(t *testing.T) {
	eachRW(t, func(t *testing.T, r *rw) {
		msgs := r.subscribe()
		tok := r.write("w", 0, false)[2]
		require.Equal(t, acquired(1, 0), r.read("w", 0, long), "the writer takes the read lock")
		require.Equal(t, acquired(2, 0), r.read("w", 1, long))
		require.Equal(t, "write", r.hash()["mode"])
		blocked(t, r.read("a", 0, long))

		// The writer's own read release wakes nobody: the write hold remains.
		require.Equal(t, []int64{0, 1}, r.unlockRead("w", 2, r.newReq()))
		msgs.none()

		require.Equal(t, []int64{1, 0}, r.unlockWrite("w", 1, r.newReq()))
		require.Equal(t, base.ReadUnlockMessage, msgs.next(), "ending write mode wakes every waiter")
		require.Equal(t, map[string]string{"mode": "read", reader("w"): "1"}, r.hash())
		ttl := r.pttl(r.name)
		require.Positive(t, ttl)
		require.LessOrEqual(t, ttl, r.pttl(r.timeoutKey("w", 1))+time.Second, "the hash's TTL is the reads' lease now")

		require.Equal(t, acquired(1, 0), r.read("a", 0, long), "readers get in after the downgrade")
		blocked(t, r.write("v", 0, false))
		require.Equal(t, []int64{1, 0}, r.unlockRead("w", 1, r.newReq()))
		msgs.none() // reader a remains
		require.Equal(t, []int64{1, 0}, r.unlockRead("a", 1, r.newReq()))
		require.Equal(t, base.UnlockMessage, msgs.next(), "the last reader leaving wakes a writer")
		res := r.write("v", 0, false)
		require.Greater(t, res[2], tok)
	})
}

func TestRWUpgradeRefused(t *testing.T) {
	eachRW(t, func(t *testing.T, r *rw) {
		require.Equal(t, acquired(1, 0), r.read("a", 0, long))
		before := r.hash()
		require.Equal(t, []int64{-2, 0}, r.write("a", 0, true), "sole reader")
		require.Equal(t, before, r.hash())
		require.False(t, r.exists(r.wait()), "a refused upgrade does not register as a waiting writer")
		require.Equal(t, acquired(1, 0), r.read("b", 0, long))
		require.Equal(t, []int64{-2, 0}, r.write("a", 0, false), "one of several readers")
		blocked(t, r.write("b2", 0, false))
	})
}

func TestRWReaderLeaseRunsOutAlone(t *testing.T) {
	eachRW(t, func(t *testing.T, r *rw) {
		require.Equal(t, acquired(1, 0), r.read("short", 0, 100))
		require.Equal(t, acquired(1, 0), r.read("long", 0, long))
		require.Eventually(t, func() bool { return !r.exists(r.timeoutKey("short", 1)) },
			10*time.Second, 10*time.Millisecond)

		blocked(t, r.write("w", 0, false)) // "long" still reads
		require.NotContains(t, r.hash(), reader("short"), "the writer pruned the expired reader")
		require.Equal(t, []int64{-1, 0}, r.read("short", 1, long), "a re-entry finds its holds gone")
		require.Equal(t, []int64{-1, 0}, r.unlockRead("short", 1, r.newReq()))
		require.Equal(t, acquired(2, 0), r.read("long", 1, long), "the other reader keeps its lock")

		// When every reader's lease has run out, a writer takes the lock.
		require.Equal(t, acquired(1, 0), r.read("x", 0, 100))
		require.NoError(t, r.rdb.Del(r.ctx, r.timeoutKey("long", 1), r.timeoutKey("long", 2)).Err()) // as if run out
		require.Eventually(t, func() bool { return !r.exists(r.timeoutKey("x", 1)) },
			10*time.Second, 10*time.Millisecond)
		res := r.write("w", 0, false)
		require.Equal(t, acquired(1, res[2]), res)
		require.Equal(t, map[string]string{"mode": "write", writer("w"): "1"}, r.hash())
	})
}

func TestRWResentCommandsActOnce(t *testing.T) {
	eachRW(t, func(t *testing.T, r *rw) {
		msgs := r.subscribe()
		for range 2 {
			require.Equal(t, acquired(1, 0), r.read("a", 0, long))
		}
		for range 2 {
			require.Equal(t, acquired(2, 0), r.read("a", 1, long))
		}
		require.Equal(t, "2", r.hash()[reader("a")])
		req := r.newReq()
		for range 2 {
			require.Equal(t, []int64{0, 1}, r.unlockRead("a", 2, req))
		}
		req = r.newReq()
		for range 2 {
			require.Equal(t, []int64{1, 0}, r.unlockRead("a", 1, req))
		}
		require.Equal(t, base.UnlockMessage, msgs.next())
		msgs.none() // the re-sent last release published nothing

		first := r.write("w", 0, false)
		require.Equal(t, first, r.write("w", 0, false), "a re-sent grant: same holds, same token")
		second := r.write("w", 1, false)
		require.Equal(t, second, r.write("w", 1, false))
		require.Equal(t, acquired(2, first[2]), second)
		req = r.newReq()
		for range 2 {
			require.Equal(t, []int64{0, 1}, r.unlockWrite("w", 2, req))
		}
		req = r.newReq()
		for range 2 {
			require.Equal(t, []int64{1, 0}, r.unlockWrite("w", 1, req))
		}
		require.Equal(t, base.ReadUnlockMessage, msgs.next())
		msgs.none()
	})
}

func TestRWWaitingWriterKeepsNewReadersOut(t *testing.T) {
	eachRW(t, func(t *testing.T, r *rw) {
		msgs := r.subscribe()
		require.Equal(t, acquired(1, 0), r.read("a", 0, long))
		blocked(t, r.write("w", 0, false))
		require.Equal(t, acquired(1, 0), r.read("b", 0, long), "a one-shot try keeps nobody out")

		blocked(t, r.write("w", 0, true))
		score, err := r.rdb.ZScore(r.ctx, r.wait(), writer("w")).Result()
		require.NoError(t, err)
		require.Positive(t, score)
		res := r.read("c", 0, long)
		blocked(t, res)
		require.LessOrEqual(t, res[1], writerWait, "a reader kept out retries by the writer's deadline")
		require.Equal(t, acquired(2, 0), r.read("a", 1, long), "a reader inside re-enters")

		require.Equal(t, []int64{0, 1}, r.unlockRead("a", 2, r.newReq()))
		require.Equal(t, []int64{1, 0}, r.unlockRead("a", 1, r.newReq()))
		msgs.none() // b still reads
		require.Equal(t, []int64{1, 0}, r.unlockRead("b", 1, r.newReq()))
		require.Equal(t, base.UnlockMessage, msgs.next())
		blockedForWriter(t, r.read("c", 0, long)) // free, but the writer's turn
		res = r.write("w", 0, true)
		require.Equal(t, acquired(1, res[2]), res)
		require.False(t, r.exists(r.wait()), "the grant ends the writer's wait")
	})
}

func TestRWEveryWaitingWriterBeforeNewReaders(t *testing.T) {
	eachRW(t, func(t *testing.T, r *rw) {
		require.Equal(t, acquired(1, 0), r.read("a", 0, long))
		blocked(t, r.write("w1", 0, true))
		blocked(t, r.write("w2", 0, true))
		require.Equal(t, []int64{1, 0}, r.unlockRead("a", 1, r.newReq()))
		r.write("w1", 0, true)
		require.Equal(t, []int64{1, 0}, r.unlockWrite("w1", 1, r.newReq()))
		blockedForWriter(t, r.read("c", 0, long)) // w2 still waits
		r.write("w2", 0, true)
		require.Equal(t, []int64{1, 0}, r.unlockWrite("w2", 1, r.newReq()))
		require.Equal(t, acquired(1, 0), r.read("c", 0, long))
	})
}

func TestRWDeadWaitingWriterStopsBlocking(t *testing.T) {
	eachRW(t, func(t *testing.T, r *rw) {
		require.Equal(t, acquired(1, 0), r.read("a", 0, long))
		blocked(t, r.writeWait("w", 200)) // and then the writer dies
		blocked(t, r.read("b", 0, long))
		require.Eventually(t, func() bool { return r.read("b", 0, long)[0] == 1 },
			10*time.Second, 10*time.Millisecond)
	})
}

func TestRWLeaveWakesReaders(t *testing.T) {
	eachRW(t, func(t *testing.T, r *rw) {
		msgs := r.subscribe()
		require.Equal(t, acquired(1, 0), r.read("a", 0, long))
		blocked(t, r.write("w1", 0, true))
		blocked(t, r.write("w2", 0, true))
		require.Equal(t, int64(1), r.leave("w1"))
		msgs.none() // w2 still keeps readers out
		blocked(t, r.read("b", 0, long))
		require.Equal(t, int64(1), r.leave("w2"))
		require.Equal(t, base.ReadUnlockMessage, msgs.next())
		require.Equal(t, int64(0), r.leave("w2"), "leaving twice")
		require.Equal(t, acquired(1, 0), r.read("b", 0, long))
	})
}

func TestRWForceUnlock(t *testing.T) {
	eachRW(t, func(t *testing.T, r *rw) {
		msgs := r.subscribe()
		require.Equal(t, int64(0), r.force(r.newReq(), ""))
		r.read("a", 0, long)
		r.read("a", 1, long)
		r.read("b", 0, long)
		require.Equal(t, int64(-1), r.force(r.newReq(), "write"), "only in write mode")
		require.Equal(t, int64(-1), r.force(r.newReq(), "", reader("a")), "not exactly these holders")
		req := r.newReq()
		require.Equal(t, int64(1), r.force(req, "read", reader("a")+"\n"+reader("b")))
		require.Equal(t, base.ReadUnlockMessage, msgs.next())
		require.False(t, r.exists(r.name))
		for _, k := range []string{r.timeoutKey("a", 1), r.timeoutKey("a", 2), r.timeoutKey("b", 1)} {
			require.False(t, r.exists(k), k)
		}
		r.write("w", 0, false)
		require.Equal(t, int64(1), r.force(req, "read"), "a re-send answers from the latch")
		require.True(t, r.exists(r.name))
		require.Equal(t, int64(1), r.force(r.newReq(), "write"))
		require.Equal(t, base.ReadUnlockMessage, msgs.next())
	})
}

func TestRWRenew(t *testing.T) {
	eachRW(t, func(t *testing.T, r *rw) {
		renew := func(lease int64, keys []string, fields ...any) []int64 {
			return r.ints(lua.Renew, keys, append([]any{lease}, fields...)...)
		}
		r.read("a", 0, 1_000)
		r.read("a", 1, 1_000)
		r.read("b", 0, 1_000)
		require.Equal(t, []int64{1}, renew(long, []string{r.name}, reader("a")))
		require.Greater(t, r.pttl(r.timeoutKey("a", 1)), 30*time.Second)
		require.Greater(t, r.pttl(r.timeoutKey("a", 2)), 30*time.Second)
		require.LessOrEqual(t, r.pttl(r.timeoutKey("b", 1)), time.Second, "another reader's holds are its own")
		require.Greater(t, r.pttl(r.name), 30*time.Second)

		// A shorter lease (SetLease) shortens the reader's holds, and the
		// hash to the longest hold left (Redisson's writer reads only its
		// TTL).
		require.Equal(t, []int64{1}, renew(2_000, []string{r.name}, reader("a")))
		require.LessOrEqual(t, r.pttl(r.timeoutKey("a", 1)), 2*time.Second)
		require.LessOrEqual(t, r.pttl(r.timeoutKey("a", 2)), 2*time.Second)
		require.LessOrEqual(t, r.pttl(r.name), 2*time.Second)
		require.Greater(t, r.pttl(r.name), time.Second)

		// A reader whose holds ran out is not held.
		require.NoError(t, r.rdb.Del(r.ctx, r.timeoutKey("b", 1)).Err())
		require.Equal(t, []int64{0}, renew(long, []string{r.name}, reader("b")))
		require.Equal(t, []int64{0}, renew(long, []string{r.name}, reader("nobody")))
	})
}

func TestRWRenewWriter(t *testing.T) {
	eachRW(t, func(t *testing.T, r *rw) {
		renew := func(lease int64, fields ...any) []int64 {
			return r.ints(lua.Renew, []string{r.name}, append([]any{lease}, fields...)...)
		}
		r.write("w", 0, false)
		require.Equal(t, []int64{1}, renew(2_000, writer("w")))
		require.LessOrEqual(t, r.pttl(r.name), 2*time.Second, "a writer's lease is the hash's")
		r.read("w", 0, long) // downgrade in progress
		require.Equal(t, []int64{1}, renew(2_000, writer("w")))
		require.Greater(t, r.pttl(r.name), 30*time.Second, "never below the read holds beside it")
		require.Equal(t, []int64{0}, renew(2_000, writer("v")))
	})
}

// A reentrant lock's renewal is unchanged: its TTL becomes the lease.
func TestRenewReentrantUnchanged(t *testing.T) {
	eachRW(t, func(t *testing.T, r *rw) {
		res, err := lua.AcquireReply(lua.Lock.Run(r.ctx, r.rdb, []string{r.name, r.token()}, long, reader("a"), 0, "0"))
		require.NoError(t, err)
		require.Equal(t, int64(1), res[0])
		require.Equal(t, []int64{1, 0}, r.ints(lua.Renew, []string{r.name, r.name}, 2_000, reader("a"), reader("b")))
		require.LessOrEqual(t, r.pttl(r.name), 2*time.Second)
	})
}

// The scripts respect state that Redisson writes: its readers and writers,
// built here by hand in its layout (the facts in REDISSON-NOTES.md).
func TestRWRedissonLayout(t *testing.T) {
	eachRW(t, func(t *testing.T, r *rw) {
		javaReader := "5f0c8e2a-0000-4000-8000-000000000001:57"
		timeout := func(n int) string {
			return "{" + r.name + "}:" + javaReader + ":rwlock_timeout:" + strconv.Itoa(n)
		}
		require.NoError(t, r.rdb.HSet(r.ctx, r.name, "mode", "read", javaReader, 2).Err())
		require.NoError(t, r.rdb.PExpire(r.ctx, r.name, 30*time.Second).Err())
		for n := 1; n <= 2; n++ {
			require.NoError(t, r.rdb.Set(r.ctx, timeout(n), 1, 30*time.Second).Err())
		}
		blocked(t, r.write("w", 0, false))
		require.Equal(t, acquired(1, 0), r.read("a", 0, long), "readers share with a Java reader")
		require.Equal(t, "{"+r.name+"}:"+reader("a")+":rwlock_timeout:1", r.timeoutKey("a", 1))
		require.True(t, r.exists(r.timeoutKey("a", 1)), "our read holds in Redisson's layout")
		require.Equal(t, []int64{1, 0}, r.unlockRead("a", 1, r.newReq()))
		require.Equal(t, "2", r.hash()[javaReader], "the Java reader keeps its holds")

		// The Java reader's leases run out: its field no longer counts.
		require.NoError(t, r.rdb.Del(r.ctx, timeout(1), timeout(2)).Err())
		res := r.write("w", 0, false)
		require.Equal(t, acquired(1, res[2]), res)
		require.Equal(t, []int64{1, 0}, r.unlockWrite("w", 1, r.newReq()))

		// A Java writer excludes our readers and writers.
		javaWriter := "5f0c8e2a-0000-4000-8000-000000000001:58:write"
		require.NoError(t, r.rdb.HSet(r.ctx, r.name, "mode", "write", javaWriter, 1).Err())
		require.NoError(t, r.rdb.PExpire(r.ctx, r.name, 30*time.Second).Err())
		blocked(t, r.read("a", 0, long))
		blocked(t, r.write("w", 0, true))
		require.Equal(t, []int64{-1, 0}, r.unlockWrite("w", 1, r.newReq()))

		// A reentrant lock by the same name is another kind: both wait.
		require.NoError(t, r.rdb.Del(r.ctx, r.name).Err())
		require.NoError(t, r.rdb.HSet(r.ctx, r.name, reader("z"), 1).Err())
		blocked(t, r.read("a", 0, long))
		blocked(t, r.write("w", 0, true))
	})
}

// A name with its own hash tag: every key follows Redisson's suffix rule,
// and the scripts run on a cluster (all keys in the name's slot).
func TestRWHashTaggedName(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		r := newRW(t, b, "{"+redistest.Name(t)+"}.rw")
		require.Equal(t, r.name+":"+reader("a")+":rwlock_timeout:1", r.timeoutKey("a", 1))
		require.Equal(t, acquired(1, 0), r.read("a", 0, long))
		require.True(t, r.exists(r.timeoutKey("a", 1)))
		blocked(t, r.write("w", 0, true))
		require.Equal(t, []int64{1, 0}, r.unlockRead("a", 1, r.newReq()))
		require.Equal(t, int64(1), r.write("w", 0, true)[0])
		require.Equal(t, []int64{1}, r.ints(lua.Renew, []string{r.name}, long, writer("w")))
	})
}

// A wrong-type key never breaks a script with a Lua error mid-way: it is
// reported by Redis as WRONGTYPE before anything changed.
func TestRWWrongType(t *testing.T) {
	eachRW(t, func(t *testing.T, r *rw) {
		require.NoError(t, r.rdb.Set(r.ctx, r.name, "x", 0).Err())
		_, err := lua.RWReadLock.Run(r.ctx, r.rdb, []string{r.name, r.wait()}, long, reader("a"), 0, writer("a")).Result()
		var rerr redis.Error
		require.True(t, errors.As(err, &rerr), "%v", err)
		require.Equal(t, []int64{0}, r.ints(lua.Renew, []string{r.name}, long, reader("a")))
	})
}

// TestRWHoldsAndState: rw_holds.lua counts a reader's holds only while one
// of its timeout keys lives; rw_state.lua shows live holders with their
// leases and live waiting writers, and changes nothing.
func TestRWHoldsAndState(t *testing.T) {
	eachRW(t, func(t *testing.T, r *rw) {
		holds := func(id string) int64 {
			n, err := lua.RWHolds.Run(r.ctx, r.rdb, []string{r.name}, reader(id)).Int64()
			require.NoError(t, err)
			return n
		}
		state := func() []any {
			res, err := lua.RWState.Run(r.ctx, r.rdb, []string{r.name, r.wait()}).Slice()
			require.NoError(t, err)
			return res
		}
		require.Equal(t, []any{"", int64(-2), int64(0), int64(0)}, state()[1:], "free")
		require.Zero(t, holds("a"))

		require.Equal(t, acquired(1, 0), r.read("a", 0, long))
		require.Equal(t, acquired(2, 0), r.read("a", 1, long))
		require.Equal(t, acquired(1, 0), r.read("b", 0, long))
		require.Equal(t, int64(2), holds("a"))
		blocked(t, r.write("w", 0, true)) // registers as a waiting writer

		res := state()
		require.Equal(t, "read", res[1])
		require.Equal(t, int64(2), res[3], "two live readers")
		byField := map[any]int64{res[4]: res[5].(int64), res[7]: res[8].(int64)}
		require.Equal(t, map[any]int64{reader("a"): 2, reader("b"): 1}, byField)
		require.Greater(t, res[6].(int64), int64(50_000))
		require.Equal(t, int64(1), res[10], "one waiting writer")
		require.Equal(t, writer("w"), res[11])
		require.Greater(t, res[12].(int64), res[0].(int64))

		// A reader whose timeout keys are gone is neither counted nor shown,
		// and stays in the hash (the state script prunes nothing).
		require.NoError(t, r.rdb.Del(r.ctx, r.timeoutKey("b", 1)).Err())
		require.Zero(t, holds("b"))
		require.Equal(t, int64(1), state()[3])
		require.Contains(t, r.hash(), reader("b"))
	})
}
