package rwlock_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/redistest"
)

// Regression (issue 30): a blocking read-write Lock joined the lock's
// channel before its first attempt even when that attempt was granted:
// the client kept the channel subscribed (lingering between calls), so
// every release published to the client itself (a message read and
// handled for nothing), and the grant took the client out of the writers'
// or readers' registry (a ZREM) because it listened. Uncontended, a Lock
// now attempts first and touches no pub/sub: here a write and a read
// lock+unlock each run the commands of their scripts' fast paths and no
// more, on a client that ends with no channel, lingering or not. The
// server's counts pin what one uncontended lock+unlock costs (11 commands
// for a write, 12 for a read: the read hold's timeout key), so that it
// cannot grow back unnoticed.
func TestUncontendedRWLockTouchesNoPubSub(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		c := newClient(t, b)
		l := newRW(t, c, name)
		admin := b.NewClient(t)
		for _, side := range []struct {
			name string
			l    rlock.Locker
			want map[string]int64 // per lock+unlock
		}{
			{"write", l.WriteLock(), map[string]int64{
				// rw_write_lock.lua: EXISTS of the hash, the writer-wait set
				// and the until key; HSET; PEXPIRE
				"evalsha": 2, "exists": 2, "hset": 1, "pexpire": 1,
				// rw_unlock_write.lua: HGETALL; EXISTS of the until key and
				// the registries; the latch's SET ... GET and APPEND; DEL;
				// PUBLISH
				"hgetall": 1, "set": 1, "append": 1, "del": 1, "publish": 1}},
			{"read", l.ReadLock(), map[string]int64{
				// rw_read_lock.lua: EXISTS of the hash and the writer-wait
				// set; HSET; PEXPIRE; SET of the hold's timeout key
				"evalsha": 2, "exists": 2, "hset": 1, "pexpire": 1,
				// rw_unlock_read.lua: HGETALL; EXISTS of the timeout key;
				// the latch's SET ... GET and APPEND; DEL; PUBLISH
				"hgetall": 1, "set": 2, "append": 1, "del": 1, "publish": 1}},
		} {
			t.Run(side.name, func(t *testing.T) {
				lockUnlock := func() {
					require.NoError(t, side.l.Lock(ctx))
					require.NoError(t, side.l.Unlock(ctx))
				}
				lockUnlock() // loads the scripts and leaves the latch key
				const n = 10
				if !b.IsReal() { // miniredis keeps no command statistics
					for range n {
						lockUnlock()
					}
				} else {
					stats := redistest.CommandsDuring(t, admin, func() {
						for range n {
							lockUnlock()
						}
					})
					delete(stats, "config|resetstat")
					want := make(map[string]int64, len(side.want))
					var total int64
					for cmd, k := range side.want {
						want[cmd] = k * n
						total += k
					}
					require.Equal(t, want, stats, "server commands of %d uncontended lock+unlock (%d each)", n, total)
				}
				require.Equal(t, rlock.WaiterStats{}, c.Waiters(), "no channel joined, subscribed or lingering")
				if b.IsReal() {
					subs, err := admin.PubSubNumSub(ctx, base.RWChannel(name)).Result()
					require.NoError(t, err)
					require.Zero(t, subs[base.RWChannel(name)], "subscribers of the lock's channel")
				}
			})
		}
	})
}
