package faults

import (
	"context"
	"errors"
	"github.com/rlock-go/rlock"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/history"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/reentrant"
	"github.com/rlock-go/rlock/watchdog"
)

// sleepOrStop waits d or until stop is closed, and reports whether stop was
// closed. Injectors use it to time faults (never to synchronise with the
// code under test).
func sleepOrStop(d time.Duration, stop <-chan struct{}) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return false
	case <-stop:
		return true
	}
}

// waitInside waits until some worker is in its critical section, or stop.
func (r *rig) waitInside(stop <-chan struct{}) bool {
	select {
	case <-r.inside: // drain a stale signal first
	default:
	}
	select {
	case <-r.inside:
		return true
	case <-stop:
		return false
	}
}

// strikes is how many times the restart, freeze and outage tests strike:
// once in the short form, twice in the long form (RLOCK_FAULTS_LONG=1),
// ten times in a soak run.
func strikes() int {
	switch {
	case soak():
		return 10
	case long():
		return 2
	}
	return 1
}

// baseConfig is the configuration every run starts from: 8 clients with a
// watchdog lease long enough that no hold expires unless the fault makes
// it. A call with an unknown outcome may take effect at any later moment:
// the library carries out what it meant (a release completed, a hold an
// acquisition took given back) at once, in the background once Redis
// answers, or at the owner's next call on the lock, whenever that is.
func baseConfig(fault string) config {
	return config{
		fault:        fault,
		clients:      8,
		rounds:       15,
		lease:        2 * time.Second,
		section:      3 * time.Millisecond,
		linearizable: true,
		exclusive:    true,
		grace:        -1,
		timeout:      90 * time.Second,
	}
}

// TestFaultNone is the baseline: the same workload without a fault.
func TestFaultNone(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		newRig(t, b, baseConfig("none")).run(nil)
	})
}

// TestFaultLatency: every chunk through the proxy is delayed by up to 20 ms,
// switched on and off every 50 ms.
func TestFaultLatency(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		cfg := baseConfig("latency 0-20 ms")
		cfg.viaProxy = true
		cfg.inject = func(r *rig, stop <-chan struct{}) {
			on := false
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
			every(50*time.Millisecond, stop, func() {
				on = !on
				if on {
					r.proxy.SetLatency(time.Duration(1+rng.IntN(20)) * time.Millisecond)
				} else {
					r.proxy.SetLatency(0)
				}
			})
		}
		r := newRig(t, b, cfg)
		r.run(func() { r.proxy.SetLatency(0) })
	})
}

// TestFaultBlackhole: the proxy swallows everything for 200 ms every 500 ms;
// clients time out after 100 ms, so calls fail with unknown outcomes and are
// retried. The blackhole is shorter than the lease: no hold expires.
func TestFaultBlackhole(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		runBlackholes(t, b, withBlackholes(baseConfig("blackhole 200 ms"), 300*time.Millisecond, 0))
	})
}

// TestFaultBlackholeAutoPipelined is TestFaultBlackhole with the workers
// sharing auto-pipelining clients: an attempt waits for its reply from the
// auto-pipeliner on the caller's goroutine, and a reply that never comes
// must end it when the read times out, as it does a direct call.
func TestFaultBlackholeAutoPipelined(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		cfg := withBlackholes(baseConfig("blackhole 200 ms, auto-pipelined"), 100*time.Millisecond, 2*strikes())
		cfg.autoPipeline = true
		cfg.untilInjected = true // through every strike
		runBlackholes(t, b, cfg)
	})
}

// withBlackholes returns cfg run through the proxy with 100 ms client
// timeouts, the proxy swallowing everything for 200 ms after every gap:
// times times, or until the run ends when times is 0.
func withBlackholes(cfg config, gap time.Duration, times int) config {
	cfg.viaProxy = true
	cfg.redisOpts = []func(*redis.Options){func(o *redis.Options) {
		o.ReadTimeout = 100 * time.Millisecond
		o.WriteTimeout = 100 * time.Millisecond
	}}
	cfg.inject = func(r *rig, stop <-chan struct{}) {
		for i := 0; times == 0 || i < times; i++ {
			if sleepOrStop(gap, stop) {
				return
			}
			r.proxy.Blackhole(true)
			stopped := sleepOrStop(200*time.Millisecond, stop)
			r.proxy.Blackhole(false)
			if stopped {
				return
			}
		}
	}
	return cfg
}

// runBlackholes runs a configuration of withBlackholes, ending any
// blackhole before the final checks.
func runBlackholes(t *testing.T, b *redistest.Backend, cfg config) {
	r := newRig(t, b, cfg)
	r.run(func() { r.proxy.Blackhole(false) })
}

// TestFaultConnectionReset: every connection through the proxy, the pub/sub
// connections included, is closed every 60 ms.
func TestFaultConnectionReset(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		cfg := baseConfig("connection reset")
		cfg.viaProxy = true
		cfg.inject = func(r *rig, stop <-chan struct{}) {
			every(60*time.Millisecond, stop, r.proxy.ResetAll)
		}
		newRig(t, b, cfg).run(nil)
	})
}

// TestFaultLostReply: every 25 ms the proxy drops the reply of the next
// script call (acquire, re-entry, release, renewal) after the server ran
// it; go-redis sends it again, and hold counts must stay exact. The second
// variant turns go-redis' retries off: each lost reply is an error, the
// worker reads its hold count and calls again only if the call did not
// take effect (see worker.do), and the library must take that next call
// for a new one.
func TestFaultLostReply(t *testing.T) {
	for _, v := range []struct {
		name    string
		retries int
	}{{"reply lost after the command ran", 0}, {"reply lost, client retries off", -1}} {
		t.Run(strings.ReplaceAll(v.name, " ", "_"), func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				cfg := baseConfig(v.name)
				cfg.viaProxy = true
				if v.retries != 0 {
					cfg.redisOpts = []func(*redis.Options){func(o *redis.Options) { o.MaxRetries = v.retries }}
				}
				cfg.lease = time.Second // renewals every 333 ms: some of their replies are lost too
				cfg.inject = func(r *rig, stop <-chan struct{}) {
					every(25*time.Millisecond, stop, func() { dropSome(r, 1) })
					r.proxy.DropNextReply("\x00never\x00") // disarm
					t.Logf("replies dropped: %d", r.proxy.Dropped())
				}
				newRig(t, b, cfg).run(nil)
			})
		})
	}
}

// TestFaultPubSubKill: CLIENT KILL TYPE pubsub every 40 ms while goroutines
// wait. The lease is the default 30 s, so waiters that relied on the TTL
// bound after a lost wake-up would blow the run's 60 s budget: every waiter
// gets the lock because the client re-checks after resubscribing. Real
// Redis only (miniredis has no CLIENT KILL); the reset test covers the
// pub/sub connection on miniredis.
func TestFaultPubSubKill(t *testing.T) {
	b := redistest.Real(t)
	cfg := baseConfig("pub/sub connection killed")
	cfg.lease = watchdog.DefaultLease
	cfg.section = 10 * time.Millisecond
	cfg.timeout = 60 * time.Second
	cfg.inject = func(r *rig, stop <-chan struct{}) {
		killed := int64(0)
		every(40*time.Millisecond, stop, func() {
			n, err := r.direct.ClientKillByFilter(context.Background(), "TYPE", "pubsub").Result()
			if err == nil {
				killed += n
			}
		})
		t.Logf("pub/sub connections killed: %d", killed)
	}
	newRig(t, b, cfg).run(nil)
}

// TestFaultRestart: redis-server is killed and restarted empty twice while a
// lock is held. Clients recover without being restarted, the holder is told
// (Done, or ErrNotHeld at its unlock), waiters are granted afterwards. The
// restart is recorded as a Wipe: the model frees the lock at one moment
// within it. Two owners may believe they hold the lock until the old holder
// is told (the data is gone), so the exclusion check does not apply.
func TestFaultRestart(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		cfg := baseConfig("server killed and restarted")
		cfg.lease = time.Second
		cfg.section = 50 * time.Millisecond
		cfg.exclusive = false
		cfg.tokensReset = true // no persistence: the counter starts again
		cfg.noCover = true     // holders believe until told: the data is gone
		restarts, want := 0, strikes()
		cfg.inject = func(r *rig, stop <-chan struct{}) {
			for restarts < want && r.waitInside(stop) {
				from := r.rec.Now()
				b.Restart(t)
				r.rec.Wipe(from, r.rec.Now())
				restarts++
				if sleepOrStop(200*time.Millisecond, stop) {
					return
				}
			}
		}
		r := newRig(t, b, cfg)
		r.run(nil)
		require.Equal(t, want, restarts)
		lost := 0
		for _, w := range r.workers {
			lost += w.lost
		}
		require.Positive(t, lost, "a holder was told its lock was lost")
	})
}

// TestFaultFreeze: redis-server is stopped with SIGSTOP while a lock is held,
// for 1.5 s, past the 500 ms watchdog lease, then resumed; twice. The holder
// is told the lock was lost while the server is frozen, and nobody is
// granted before the server resumes, so no two owners believe they hold the
// lock at once. The hold may expire during the freeze: the model records a
// Lapse of whoever holds the lock, from the freeze to the resume.
func TestFaultFreeze(t *testing.T) {
	b := redistest.Real(t)
	cfg := baseConfig("server frozen past the lease (SIGSTOP)")
	cfg.lease = 500 * time.Millisecond
	cfg.section = 50 * time.Millisecond
	freezes, want := 0, strikes()
	cfg.inject = func(r *rig, stop <-chan struct{}) {
		for freezes < want && r.waitInside(stop) {
			from := r.rec.Now()
			b.Real.Freeze()
			freezes++
			sleepOrStop(1500*time.Millisecond, nil)
			b.Real.Thaw()
			// The hold that existed at the freeze has expired once the server
			// runs again (its lease is shorter than the freeze); nothing was
			// acquired meanwhile.
			r.rec.Lapse(-1, from, r.rec.Now())
			if sleepOrStop(200*time.Millisecond, stop) {
				return
			}
		}
	}
	r := newRig(t, b, cfg)
	r.run(b.Real.Thaw)
	require.Equal(t, want, freezes)
	lost := 0
	for _, w := range r.workers {
		lost += w.lost
	}
	require.Positive(t, lost, "a holder was told its lock was lost")
}

const holderEnv = "RLOCK_FAULTS_HOLDER" // "addr name leaseMillis"

// TestHelperKilledHolder is not a test: it is the child process of
// TestFaultHolderKilled. It takes the lock twice (re-entry) in watchdog
// mode, says so, and waits to be killed.
func TestHelperKilledHolder(t *testing.T) {
	if !redistest.IsHelperProcess() {
		t.Skip("helper process for TestFaultHolderKilled")
	}
	args := strings.Fields(os.Getenv(holderEnv))
	require.Len(t, args, 3)
	leaseMS, err := strconv.Atoi(args[2])
	require.NoError(t, err)
	rdb := redis.NewClient(&redis.Options{Addr: args[0]})
	c, err := rlock.NewClient(rdb, rlock.WithWatchdogLease(time.Duration(leaseMS)*time.Millisecond))
	require.NoError(t, err)
	l, err := reentrant.New(c, args[1])
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, l.Lock(ctx))
	require.NoError(t, l.Lock(l.Ctx())) // a re-entry
	os.Stdout.WriteString("locked\n")
	<-l.Done() // until killed; a loss ends the helper early and fails the parent
	t.Fatalf("lost the lock: %v", l.Err())
}

// TestFaultHolderKilled: a child process holds the lock (twice, re-entered)
// with a 1 s watchdog lease while 8 clients wait for it; it is killed with
// SIGKILL. Nothing unlocks: the next waiter is granted when the lease runs
// out, within one watchdog lease of the kill. The child's holds are
// recorded as its two Lock calls, and the kill as a Lapse and as the end of
// its belief.
func TestFaultHolderKilled(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		cfg := baseConfig("holder process killed (SIGKILL)")
		cfg.lease = time.Second
		cfg.strangers = true // the child's hold
		r := newRig(t, b, cfg)
		childID := len(r.workers)
		call := r.rec.Now()
		child := redistest.StartHelperProcess(t, "TestHelperKilledHolder",
			holderEnv+"="+b.Addr+" "+r.name+" "+strconv.Itoa(int(cfg.lease.Milliseconds())))
		child.WaitLine(t, "locked", 30*time.Second)
		ret := r.rec.Now()
		for range 2 {
			r.rec.Add(history.Op{Owner: childID, Kind: history.Lock, Outcome: history.OK, Call: call, Return: ret})
		}
		var killed int64
		r.cfg.inject = func(r *rig, stop <-chan struct{}) {
			// Kill once most workers are waiting (the others may have been
			// refused by TryLock and will come back).
			require.Eventually(t, func() bool {
				n := 0
				for _, w := range r.workers {
					n += w.c.Waiters().Waiters
				}
				return n >= len(r.workers)/2
			}, 30*time.Second, time.Millisecond)
			child.Kill()
			killed = r.rec.Now()
			r.rec.Lapse(childID, killed, history.Forever)
			r.rec.Add(history.Op{Owner: childID, Kind: history.Lost, Outcome: history.OK, Call: killed, Return: killed})
		}
		r.run(nil)
		first := history.Forever
		for _, op := range r.rec.Ops() {
			if op.Owner != childID && op.Outcome == history.OK && (op.Kind == history.Lock || op.Kind == history.TryLock) && op.Return > killed {
				first = min(first, op.Return)
			}
		}
		grant := time.Duration(first - killed)
		t.Logf("first grant %v after the kill (watchdog lease %v)", grant, cfg.lease)
		// Generous slack for a loaded CI machine; the bound that matters is
		// one lease, and timing figures are logged, not asserted tightly.
		require.Less(t, grant, cfg.lease+2*time.Second, "granted within one watchdog lease of the kill")
	})
}

// TestFaultFair runs the fair lock through the faults that keep its queue:
// no fault and latency with the FIFO check (a waiter seen in the queue
// before another started to wait is granted first), and lost replies and
// connection resets with the history checks (a waiter whose call fails
// leaves the queue and rejoins at the tail, so FIFO is not checked there).
func TestFaultFair(t *testing.T) {
	cases := []struct {
		name   string
		fifo   bool
		inject func(r *rig, stop <-chan struct{})
	}{
		{"fair: none", true, nil},
		{"fair: latency 0-20 ms", true, func(r *rig, stop <-chan struct{}) {
			on := false
			every(50*time.Millisecond, stop, func() {
				if on = !on; on {
					r.proxy.SetLatency(time.Duration(1+time.Now().UnixNano()%20) * time.Millisecond)
				} else {
					r.proxy.SetLatency(0)
				}
			})
		}},
		{"fair: reply lost after the command ran", false, func(r *rig, stop <-chan struct{}) {
			every(25*time.Millisecond, stop, func() { dropSome(r, 1) })
			r.proxy.DropNextReply("\x00never\x00") // disarm
		}},
		{"fair: connection reset", false, func(r *rig, stop <-chan struct{}) {
			every(60*time.Millisecond, stop, r.proxy.ResetAll)
		}},
	}
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(strings.TrimPrefix(tc.name, "fair: "), " ", "_"), func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				cfg := baseConfig(tc.name)
				cfg.fair, cfg.fifo = true, tc.fifo
				cfg.viaProxy = true
				cfg.inject = tc.inject
				r := newRig(t, b, cfg)
				r.run(func() { r.proxy.SetLatency(0) })
			})
		})
	}
}

// maxDrops bounds the replies a run drops: a blocking Lock goes on trying
// through lost replies until its ctx ends, so a worker left alone with a
// drop armed every 25 ms would never get an answer.
const maxDrops = 150

// dropSome arms the proxy to drop the next n script replies, while the run
// has dropped fewer than maxDrops.
func dropSome(r *rig, n int) {
	if r.proxy.Dropped() < maxDrops {
		r.proxy.DropReplies("evalsha", n)
	}
}

// TestFaultLostReplyThenOtherCalls: as TestFaultLostReply, but a worker
// whose call failed never makes it again: it reads its hold count and goes
// on with other calls (see worker.roundSettle), as a user must who cannot
// tell what the failed call did: Lock twice, an Unlock whose reply was
// lost, another Unlock. Go-redis' retries are off, or exhausted (it
// retries once and that reply is lost too). Each count read pins down what
// the failed call did, so the history checks that the next, different
// call is never mistaken for a re-send of the failed one; and no lock may
// be left held after its owner's last successful Unlock. Reentrant and
// fair.
func TestFaultLostReplyThenOtherCalls(t *testing.T) {
	for _, v := range []struct {
		name    string
		retries int
		fair    bool
	}{
		{"reply lost, retries off, then other calls", -1, false},
		{"reply lost, retries exhausted, then other calls", 1, false},
		{"fair: reply lost, retries off, then other calls", -1, true},
		{"fair: reply lost, retries exhausted, then other calls", 1, true},
	} {
		t.Run(strings.ReplaceAll(v.name, " ", "_"), func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				cfg := baseConfig(v.name)
				cfg.viaProxy, cfg.settle, cfg.fair = true, true, v.fair
				cfg.redisOpts = []func(*redis.Options){func(o *redis.Options) { o.MaxRetries = v.retries }}
				cfg.lease = time.Second
				cfg.rounds = 10
				cfg.timeout = 60 * time.Second // a lock nobody can take again fails the run by then (roomy: CI runs packages side by side)
				drops := max(v.retries, 0) + 1 // one per copy go-redis sends
				cfg.inject = func(r *rig, stop <-chan struct{}) {
					every(25*time.Millisecond, stop, func() { dropSome(r, drops) })
					r.proxy.DropReplies("", 0)
					t.Logf("replies dropped: %d", r.proxy.Dropped())
				}
				newRig(t, b, cfg).run(nil)
			})
		})
	}
}

// TestFaultLeaseReentry: workers hold the lock in watchdog mode and some
// re-enter it asking for a lease (50 ms) much shorter than the critical
// section that follows (120-180 ms): with LockLease, or with a MultiLock
// WithLease over the lock and a private one, taken and released. A
// re-entry must not take the watchdog's protection away from the hold:
// the lock may not expire inside the section while the holder's Done is
// open, nor be taken by another worker then. Reentrant and fair.
func TestFaultLeaseReentry(t *testing.T) {
	for _, fairLock := range []bool{false, true} {
		name := "explicit lease on a watchdog hold's re-entry"
		if fairLock {
			name = "fair: " + name
		}
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				cfg := baseConfig(name)
				cfg.leases, cfg.fair = true, fairLock
				cfg.rounds = 5
				newRig(t, b, cfg).run(nil)
			})
		})
	}
}

// TestFaultForceUnlockResent: every 5-20 ms the lock is force-unlocked,
// mostly at a moment it is seen free, through a client whose reply is lost
// after the script ran; go-redis re-sends the script 20-80 ms later, by
// when a worker has often taken the lock (see forcer). Workers pause
// between rounds, so the lock is often free. The re-send must not act again: the call is recorded
// as taking effect before the re-send was dialled. Holders that lost the
// lock to a force unlock keep believing they hold it until they are told,
// so only the linearizability and token checks apply. Reentrant and fair.
func TestFaultForceUnlockResent(t *testing.T) {
	for _, fairLock := range []bool{false, true} {
		name := "force unlock re-sent late"
		if fairLock {
			name = "fair: " + name
		}
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				cfg := baseConfig(name)
				cfg.force, cfg.fair = true, fairLock
				cfg.exclusive = false
				cfg.noCover = true                 // a force unlock deletes holds behind their holders' backs
				cfg.think = 150 * time.Millisecond // the lock is often free when it is force-unlocked
				newRig(t, b, cfg).run(nil)
			})
		})
	}
}

// TestFaultWakeUpAttemptFails: four goroutines of one client wait for a
// lock held elsewhere with the default 30 s watchdog lease; each has made
// an attempt that saw that TTL, so nothing but a wake-up makes it try
// again before then. The holder unlocks; the release wakes the
// longest-waiting one, and the attempt it starts fails: a Redis error (the
// connection is refused before the script is sent), or its ctx ends
// between the wake-up and the attempt. The lock is free, and the client's
// other waiters must not sleep until the TTL they saw: the wake-up the
// failed attempt consumed is passed on, and the others are granted in
// turn long before (here: all within 5 s of the release).
func TestFaultWakeUpAttemptFails(t *testing.T) {
	for _, v := range []struct {
		name string
		want error
	}{
		{"redis error", errInjected},
		{"ctx ends", context.Canceled},
	} {
		t.Run(strings.ReplaceAll(v.name, " ", "_"), func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				testWakeUpAttemptFails(t, b, v.want)
			})
		})
	}
}

func testWakeUpAttemptFails(t *testing.T, b *redistest.Backend, want error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := redistest.Name(t)
	hc, err := rlock.NewClient(b.NewClient(t)) // default watchdog lease: 30 s
	require.NoError(t, err)
	t.Cleanup(func() { _ = hc.Close() })
	holder, err := reentrant.New(hc, name)
	require.NoError(t, err)
	require.NoError(t, holder.Lock(ctx))

	rdb := b.NewClient(t)
	faults := newScriptFaults()
	rdb.AddHook(faults)
	// A waiter that queued behind others without trying first waits at
	// most this long before its first attempt.
	c, err := rlock.NewClient(rdb, rlock.WithMaxPoll(50*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	type result struct {
		i   int
		at  time.Time
		err error
	}
	const n = 4
	results := make(chan result, n)
	first := newEndsOnCheck(ctx) // the ctx of the first waiter
	defer first.cancel()
	for i := range n {
		l, err := reentrant.New(c, name)
		require.NoError(t, err)
		field, err := l.Owner(ctx)
		require.NoError(t, err)
		lctx := ctx
		if i == 0 {
			lctx = first
		}
		go func() {
			err := l.Lock(lctx)
			results <- result{i, time.Now(), err}
			if err == nil {
				_ = l.Unlock(ctx)
			}
		}()
		// Wait until it sleeps on the TTL: it has tried (the first waiter
		// twice: before subscribing, and once the subscription was
		// confirmed) and no attempt is in flight.
		attempts := 1
		if i == 0 {
			attempts = 2
		}
		require.Eventually(t, func() bool {
			done, inFlight := faults.completed(field)
			return c.Waiters().Waiters == i+1 && done >= attempts && inFlight == 0
		}, 10*time.Second, time.Millisecond, "waiter %d never settled to wait on the TTL", i)
	}
	ttl, err := holder.TTL(ctx)
	require.NoError(t, err)

	// The attempt of the waiter the release wakes fails.
	if errors.Is(want, errInjected) {
		faults.fail()
	} else {
		first.arm()
	}
	released := time.Now()
	require.NoError(t, holder.Unlock(ctx))
	r := <-results
	require.Equal(t, 0, r.i, "the longest waiter is woken first")
	require.ErrorIs(t, r.err, want)

	const bound = 5 * time.Second // the TTL the waiters saw is about 30 s
	timer := time.NewTimer(bound)
	defer timer.Stop()
	for range n - 1 {
		select {
		case r := <-results:
			require.NoError(t, r.err, "waiter %d", r.i)
			t.Logf("waiter %d granted %v after the release", r.i, r.at.Sub(released).Round(time.Millisecond))
		case <-timer.C:
			t.Fatalf("the client's other waiters were not all granted within %v of the release while the lock was free "+
				"(the wake-up consumed by the failed attempt was not passed on; they sleep until the TTL they saw, about %v)",
				bound, ttl.Round(time.Second))
		}
	}
}

// endsOnCheck is a context that, once armed, is cancelled the first time
// its Err is asked: the moment its user checks it before its next step
// (for a woken waiter: between the wake-up and the attempt). Done closes
// before Err reports the cancellation, as the context contract requires.
type endsOnCheck struct {
	context.Context
	cancel context.CancelFunc
	armed  atomic.Bool
}

func newEndsOnCheck(parent context.Context) *endsOnCheck {
	ctx, cancel := context.WithCancel(parent)
	return &endsOnCheck{Context: ctx, cancel: cancel}
}

func (c *endsOnCheck) arm() { c.armed.Store(true) }

func (c *endsOnCheck) Err() error {
	if c.armed.Load() {
		c.cancel()
	}
	return c.Context.Err()
}
