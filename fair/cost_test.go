package fair_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/fair"
	"github.com/rlock-go/rlock/internal/redistest"
)

// maxCommandsPerGrant bounds the commands a real server runs per grant of
// a contended fair lock (INFO commandstats, commands run inside the
// scripts included). A grant in a busy queue takes three scripts: the
// holder's release, the head's grant and the former holder's join at the
// tail. Each reads and writes only what it needs, once: the release about
// 9 commands, the grant 12 and the join 13 (see scripts/fair_lock.lua).
// The bound leaves room for the few attempts a run makes beyond those
// (each waiter's attempt when its subscription is confirmed, a head whose
// wake-up races a join).
const maxCommandsPerGrant = 40

// TestContendedGrantServerCommands: 8 owners over 4 clients take and
// release one fair lock 30 times each, so that every release finds a
// queue of up to 7; the server runs at most maxCommandsPerGrant commands
// per grant. Before: about 60 (every script renewed, pruned and read the
// clock, the next head was woken by each grant and polled, and each join
// read the queue with one command per question).
func TestContendedGrantServerCommands(t *testing.T) {
	b := redistest.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	name := redistest.Name(t)
	const clients, owners, rounds = 4, 8, 30
	cs := make([]*rlock.Client, clients)
	for i := range cs {
		cs[i] = newClient(t, b)
	}
	ls := make([]*fair.Lock, owners)
	for i := range ls {
		ls[i] = newLock(t, cs[i%clients], name)
	}
	admin := b.NewClient(t)
	require.NoError(t, admin.ConfigResetStat(ctx).Err())

	var wg sync.WaitGroup
	errs := make(chan error, owners)
	for _, l := range ls {
		wg.Go(func() {
			for range rounds {
				if err := l.Lock(ctx); err != nil {
					errs <- err
					return
				}
				if err := l.Unlock(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	stats := redistest.CommandStats(t, admin)
	var total int64
	for cmd, n := range stats {
		if cmd != "info" && cmd != "config|resetstat" {
			total += n
		}
	}
	grants := float64(owners * rounds)
	perGrant := float64(total) / grants
	t.Logf("%.1f server commands and %.2f scripts per grant; %v", perGrant, float64(stats["evalsha"]+stats["eval"])/grants, stats)
	require.LessOrEqual(t, perGrant, float64(maxCommandsPerGrant), "server commands per grant")
}
