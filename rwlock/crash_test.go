package rwlock_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/rwlock"
)

const readerEnv = "RLOCK_TEST_RW_READER" // "addr name leaseMillis"

// TestHelperReader is the reader process of TestKilledReaderReleased: it
// takes the read lock in watchdog mode and holds it until killed.
func TestHelperReader(t *testing.T) {
	if !redistest.IsHelperProcess() {
		t.Skip("helper process for TestKilledReaderReleased")
	}
	args := strings.Fields(os.Getenv(readerEnv))
	require.Len(t, args, 3)
	ms, err := strconv.Atoi(args[2])
	require.NoError(t, err)
	rdb := redis.NewClient(&redis.Options{Addr: args[0]})
	c, err := rlock.NewClient(rdb, rlock.WithWatchdogLease(time.Duration(ms)*time.Millisecond))
	require.NoError(t, err)
	l, err := rwlock.New(c, args[1])
	require.NoError(t, err)
	require.NoError(t, l.ReadLock().Lock(context.Background()))
	os.Stdout.WriteString("locked\n")
	<-l.ReadLock().Done() // until killed; a loss ends the helper early and fails the parent
	t.Fatalf("lost the read lock: %v", l.ReadLock().Err())
}

// TestKilledReaderReleased: a reader process killed with SIGKILL (no
// unlock) drops out within its lease while another reader keeps reading
// and re-entering; a writer then gets in as soon as the live reader
// leaves.
func TestKilledReaderReleased(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		name := redistest.Name(t)
		const lease = 600 * time.Millisecond
		child := redistest.StartHelperProcess(t, "TestHelperReader",
			readerEnv+"="+b.Addr+" "+name+" "+strconv.Itoa(int(lease.Milliseconds())))
		child.WaitLine(t, "locked", 20*time.Second)

		c := newClient(t, b, rlock.WithWatchdogLease(lease))
		live := newRW(t, c, name)
		require.NoError(t, live.ReadLock().Lock(ctx))
		require.Len(t, state(t, live).Readers, 2)
		// The child's watchdog keeps its read hold past its first lease.
		renewed := c.WatchdogStats().Renewed
		require.Eventually(t, func() bool { return c.WatchdogStats().Renewed > renewed+2 }, 10*time.Second, 5*time.Millisecond)
		require.Len(t, state(t, live).Readers, 2)

		child.Kill()
		require.EventuallyWithT(t, func(c *assert.CollectT) { require.Len(c, state(c, live).Readers, 1) }, lease+2*time.Second, 5*time.Millisecond,
			"the dead reader drops out within its lease")
		require.NoError(t, live.ReadLock().Err(), "the live reader goes on")
		require.NoError(t, live.ReadLock().TryLock(ctx), "and re-enters")

		w := newRW(t, newClient(t, b), name)
		wrote := make(chan error, 1)
		go func() { wrote <- w.WriteLock().Lock(ctx) }()
		require.EventuallyWithT(t, func(c *assert.CollectT) { require.Len(c, state(c, live).Waiting, 1) }, 10*time.Second, time.Millisecond)
		require.NoError(t, live.ReadLock().Unlock(ctx))
		require.NoError(t, live.ReadLock().Unlock(ctx))
		require.NoError(t, <-wrote, "the dead reader does not hold the writer up")
		require.NoError(t, w.WriteLock().Unlock(ctx))
	})
}
