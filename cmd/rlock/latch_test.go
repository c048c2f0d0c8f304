package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/latch"
	"github.com/rlock-go/rlock/semaphore"
)

// `rlock unlock --force` refuses a count-down latch's (or a semaphore's)
// count with a message that names the documented ways to reset it, and
// deletes nothing; `rlock inspect` shows the count.
func TestUnlockForceRefusesLatch(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.NewClient(t)
		name := redistest.Name(t)
		require.NoError(t, rdb.Set(ctx, name, "3", 0).Err())

		code, out, errOut := runBin(t, "", "unlock", "--force", "--yes", redisURL(b), name)
		require.Equal(t, 1, code, "%s%s", out, errOut)
		require.Contains(t, errOut, fmt.Sprintf("not a lock: key %q holds a count of 3 (semaphore or count-down latch); unlock --force never deletes it", name))
		for _, api := range []string{"semaphore.TrySetPermits", "AddPermits", "latch.Delete"} {
			require.Contains(t, errOut, api)
		}
		require.Equal(t, "3", rdb.Get(ctx, name).Val(), "nothing deleted")

		code, out, errOut = runBin(t, "", "inspect", redisURL(b), name)
		require.Equal(t, 0, code, "%s%s", out, errOut)
		require.Contains(t, out, "kind         semaphore or count-down latch (not a lock)")
		require.Contains(t, out, "count        3: a semaphore's available permits or a count-down latch's count")
	})
}

// `rlock inspect` shows a semaphore's available permits, an expirable
// semaphore's held permits with their leases, and a latch's count, in text
// and JSON; unlock --force refuses each of them.
func TestInspectSemaphoresAndLatch(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c, err := rlock.NewClient(b.NewClient(t))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		name := redistest.Name(t)

		s, err := semaphore.New(c, name+"-sem")
		require.NoError(t, err)
		_, err = s.TrySetPermits(ctx, 5)
		require.NoError(t, err)
		require.NoError(t, s.Acquire(ctx, 1))
		code, out, errOut := runBin(t, "", "inspect", redisURL(b), s.Name())
		require.Equal(t, 0, code, "%s%s", out, errOut)
		require.Contains(t, out, "kind         semaphore (not a lock)")
		require.Contains(t, out, "count        4 permits available")

		e, err := semaphore.NewExpirable(c, name+"-exp")
		require.NoError(t, err)
		_, err = e.TrySetPermits(ctx, 2)
		require.NoError(t, err)
		p, err := e.Acquire(ctx, semaphore.WithLease(rlockMinute))
		require.NoError(t, err)
		code, out, errOut = runBin(t, "", "inspect", redisURL(b), e.Name())
		require.Equal(t, 0, code, "%s%s", out, errOut)
		require.Contains(t, out, "kind         expirable semaphore (not a lock)")
		require.Contains(t, out, "count        1 permit available")
		require.Contains(t, out, "held         1 permit in {"+e.Name()+"}:timeout")
		require.Contains(t, out, "   1. "+p.ID()+"\n      expires ")
		code, out, errOut = runBin(t, "", "inspect", "--json", redisURL(b), e.Name())
		require.Equal(t, 0, code, "%s%s", out, errOut)
		var j jsonReport
		require.NoError(t, json.Unmarshal([]byte(out), &j))
		require.NotNil(t, j.Count)
		require.Equal(t, "expirable semaphore", j.Count.Kind)
		require.Equal(t, int64(1), j.Count.Value)
		require.Len(t, j.Count.Permits, 1)
		require.Equal(t, p.ID(), j.Count.Permits[0].ID)
		require.InDelta(t, rlockMinute.Milliseconds(), *j.Count.Permits[0].InMillis, 5000)

		l, err := latch.New(c, name+"-latch")
		require.NoError(t, err)
		_, err = l.TrySetCount(ctx, 2)
		require.NoError(t, err)
		require.NoError(t, l.CountDown(ctx))
		code, out, errOut = runBin(t, "", "inspect", redisURL(b), l.Name())
		require.Equal(t, 0, code, "%s%s", out, errOut)
		require.Contains(t, out, "kind         count-down latch (not a lock)")
		require.Contains(t, out, "count        1 (the latch opens at 0)")

		for _, n := range []string{s.Name(), e.Name(), l.Name()} {
			code, out, errOut = runBin(t, "", "unlock", "--force", "--yes", redisURL(b), n)
			require.Equal(t, 1, code, "%s%s", out, errOut)
			require.Contains(t, errOut, "unlock --force never deletes it", n)
		}
		n, err := s.AvailablePermits(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(4), n)
		require.Equal(t, int64(1), mustCount(t, l))
	})
}

const rlockMinute = time.Minute

func mustCount(t *testing.T, l *latch.Latch) int64 {
	n, err := l.Count(context.Background())
	require.NoError(t, err)
	return n
}

// TestDemoPartnerAPI: the demo's semaphore run, on the embedded Redis and
// on a server: the limited run never has more calls in flight than the
// partner allows, the unlimited one does (every worker at once), and every
// service passes the latch's start line.
func TestDemoPartnerAPI(t *testing.T) {
	check := func(t *testing.T, out string, workers int) {
		t.Helper()
		require.Regexp(t, fmt.Sprintf(`unlimited +48 +%d +yes `, workers), out)
		require.Regexp(t, `semaphore +48 +[1-3] +no `, out)
		require.Contains(t, out, "through the semaphore, never more than 3 calls at once.")
		require.Contains(t, out, "Every service waited at the start line")
	}
	args := []string{"demo", "--progress=off", "--services=3", "--workers=4", "--stock=5", "--work=1ms", "--locks=none",
		"--price-cache=0", "--partner-api=4", "--partner-limit=3"}
	code, out, errOut := runBin(t, "", args...)
	require.Equal(t, 0, code, errOut)
	check(t, out, 12)
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		code, out, errOut := runBin(t, "", append(args, redisURL(b))...)
		require.Equal(t, 0, code, errOut)
		check(t, out, 12)
		keys, err := b.NewClient(t).Keys(context.Background(), "*rlock-demo:*").Result()
		require.NoError(t, err)
		require.Empty(t, keys, "the demo cleans up after itself")
	})
}
