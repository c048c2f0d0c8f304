package rlock_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/fair"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/reentrant"
	"github.com/rlock-go/rlock/rwlock"
)

// recorder is a Trace that keeps every event.
type recorder struct {
	mu       sync.Mutex
	acquires []rlock.AcquireInfo
	releases []rlock.ReleaseInfo
	losses   []rlock.LossInfo
	renewals []rlock.RenewInfo
	waits    []rlock.WaitInfo
	lost     chan rlock.LossInfo
}

func newRecorder() *recorder { return &recorder{lost: make(chan rlock.LossInfo, 16)} }

func (r *recorder) trace() *rlock.Trace {
	return &rlock.Trace{
		AcquireDone: func(i rlock.AcquireInfo) { r.mu.Lock(); r.acquires = append(r.acquires, i); r.mu.Unlock() },
		Released:    func(i rlock.ReleaseInfo) { r.mu.Lock(); r.releases = append(r.releases, i); r.mu.Unlock() },
		Lost: func(i rlock.LossInfo) {
			r.mu.Lock()
			r.losses = append(r.losses, i)
			r.mu.Unlock()
			r.lost <- i
		},
		Renewed: func(i rlock.RenewInfo) { r.mu.Lock(); r.renewals = append(r.renewals, i); r.mu.Unlock() },
		Waiting: func(i rlock.WaitInfo) { r.mu.Lock(); r.waits = append(r.waits, i); r.mu.Unlock() },
	}
}

// take returns and forgets what was recorded.
func (r *recorder) take() (a []rlock.AcquireInfo, rel []rlock.ReleaseInfo, l []rlock.LossInfo, w []rlock.WaitInfo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, rel, l, w = r.acquires, r.releases, r.losses, r.waits
	r.acquires, r.releases, r.losses, r.waits = nil, nil, nil, nil
	return
}

// logRecords is a slog handler that keeps every record.
type logRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecords) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.recs = append(h.recs, r.Clone())
	h.mu.Unlock()
	return nil
}
func (h *logRecords) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecords) WithGroup(string) slog.Handler      { return h }

// find returns the attributes of the records with message msg.
func (h *logRecords) find(msg string) []map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]string
	for _, r := range h.recs {
		if r.Message != msg {
			continue
		}
		m := map[string]string{"level": r.Level.String()}
		r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
		out = append(out, m)
	}
	return out
}

// TestTraceReportsALocksLife: a lock taken at once, a waiter handed the
// lock by a release, a TryLock refused, a Lock cancelled while waiting, a
// hold lost to a force unlock (found by the watchdog) and one lost to its
// lease are each reported once, with the lock's name, kind and owner; the
// losses are logged at Warn with lock, owner and cause.
func TestTraceReportsALocksLife(t *testing.T) {
	redistest.Each(t, func(t *testing.T, be *redistest.Backend) {
		ctx := context.Background()
		rec := newRecorder()
		logs := &logRecords{}
		c, err := rlock.NewClient(be.NewClient(t), rlock.WithTrace(rec.trace()),
			rlock.WithWatchdogLease(600*time.Millisecond), rlock.WithLogger(slog.New(logs)))
		require.NoError(t, err)
		defer c.Close()
		name := "trace-" + redistest.Name(t)
		a, err := reentrant.New(c, name)
		require.NoError(t, err)
		b, err := reentrant.New(c, name)
		require.NoError(t, err)

		// Taken at once, then a waiter handed it by the release.
		require.NoError(t, a.Lock(ctx))
		got := make(chan error, 1)
		go func() { got <- b.Lock(ctx) }()
		require.Eventually(t, func() bool { return c.Waiters().Waiters == 1 }, 5*time.Second, time.Millisecond)
		require.NoError(t, a.Unlock(ctx))
		require.NoError(t, <-got)
		acq, rel, lost, waits := rec.take()
		require.Len(t, acq, 2)
		require.Equal(t, rlock.OutcomeAcquired, acq[0].Outcome)
		require.False(t, acq[0].Waited)
		require.Equal(t, rlock.LockInfo{Name: name, Kind: "reentrant", Owner: c.ID() + ":#1"}, acq[0].LockInfo)
		require.Equal(t, rlock.OutcomeAcquired, acq[1].Outcome)
		require.True(t, acq[1].Waited)
		require.True(t, acq[1].Handoff, "granted on the attempt its wake-up started")
		require.Equal(t, c.ID()+":#2", acq[1].Owner)
		require.Positive(t, acq[1].Wait)
		require.Len(t, rel, 1)
		require.Equal(t, c.ID()+":#1", rel[0].Owner)
		require.Positive(t, rel[0].Held)
		require.Empty(t, lost)
		require.Equal(t, []int{1, -1}, deltas(waits))

		// Refused, and cancelled while waiting.
		require.ErrorIs(t, a.TryLock(ctx), rlock.ErrNotObtained)
		cctx, cancel := context.WithCancel(ctx)
		go func() { got <- a.Lock(cctx) }()
		require.Eventually(t, func() bool { return c.Waiters().Waiters == 1 }, 5*time.Second, time.Millisecond)
		cancel()
		require.ErrorIs(t, <-got, context.Canceled)
		acq, _, _, waits = rec.take()
		require.Equal(t, []rlock.Outcome{rlock.OutcomeNotObtained, rlock.OutcomeCanceled}, outcomes(acq))
		require.True(t, acq[1].Waited)
		require.False(t, acq[1].Handoff)
		require.Equal(t, []int{1, -1}, deltas(waits))

		// Lost: force-unlocked, found by the watchdog.
		_, err = a.ForceUnlock(ctx)
		require.NoError(t, err)
		l := <-rec.lost
		require.Equal(t, "not_held_at_renewal", l.Cause)
		require.Equal(t, c.ID()+":#2", l.Owner)
		require.ErrorIs(t, l.Err, rlock.ErrLockLost)
		<-b.Done()
		require.Equal(t, b.Err(), l.Err)

		// Lost: an explicit lease runs out.
		require.NoError(t, a.TryLockLease(ctx, 50*time.Millisecond))
		l = <-rec.lost
		require.Equal(t, "lease_expired", l.Cause)
		require.Equal(t, c.ID()+":#1", l.Owner)
		require.Positive(t, l.Held)

		logged := logs.find("rlock: lock lost")
		require.Len(t, logged, 2)
		require.Equal(t, map[string]string{"level": "WARN", "lock": name, "owner": c.ID() + ":#2", "cause": "not_held_at_renewal", "err": b.Err().Error()}, logged[0])
		require.Equal(t, "lease_expired", logged[1]["cause"])

		rec.mu.Lock()
		renewals := slices.Clone(rec.renewals)
		rec.mu.Unlock()
		require.NotEmpty(t, renewals, "b was renewed before it was force-unlocked")
		last := renewals[len(renewals)-1]
		require.Equal(t, 1, last.Locks)
		require.Equal(t, 1, last.NotHeld, "the round that found b gone")
		require.NoError(t, last.Err)
	})
}

// TestTraceKindsAndUnlockLoss: the kind names of the fair lock and both
// sides of a read-write lock, a loss found at unlock, and one at Close.
func TestTraceKindsAndUnlockLoss(t *testing.T) {
	redistest.Each(t, func(t *testing.T, be *redistest.Backend) {
		ctx := context.Background()
		rec := newRecorder()
		c, err := rlock.NewClient(be.NewClient(t), rlock.WithTrace(rec.trace()), rlock.WithTrace(&rlock.Trace{}))
		require.NoError(t, err)
		name := "trace-kinds-" + redistest.Name(t)
		f, err := fair.New(c, name+"-fair")
		require.NoError(t, err)
		require.NoError(t, f.Lock(ctx))
		_, err = f.ForceUnlock(ctx)
		require.NoError(t, err)
		require.ErrorIs(t, f.Unlock(ctx), rlock.ErrNotHeld)
		l := <-rec.lost
		require.Equal(t, "not_held_at_unlock", l.Cause)
		require.Equal(t, "fair", l.Kind)

		rw, err := rwlock.New(c, name+"-rw")
		require.NoError(t, err)
		require.NoError(t, rw.ReadLock().Lock(ctx))
		require.NoError(t, rw.ReadLock().Unlock(ctx))
		require.NoError(t, rw.WriteLock().Lock(ctx))
		acq, rel, _, _ := rec.take()
		require.Equal(t, []string{"fair", "read", "write"}, kinds(acq))
		require.Len(t, rel, 1)
		require.Equal(t, "read", rel[0].Kind)

		require.NoError(t, c.Close())
		l = <-rec.lost
		require.Equal(t, "client_closed", l.Cause)
		require.Equal(t, "write", l.Kind)
	})
}

func TestWithTraceNil(t *testing.T) {
	_, err := rlock.NewClient(redistest.Mini(t).NewClient(t), rlock.WithTrace(nil))
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
}

func ExampleOutcome() {
	for _, o := range []rlock.Outcome{rlock.OutcomeAcquired, rlock.OutcomeNotObtained, rlock.OutcomeCanceled, rlock.OutcomeError} {
		fmt.Println(o)
	}
	// Output:
	// acquired
	// not_obtained
	// canceled
	// error
}

func deltas(ws []rlock.WaitInfo) []int {
	var out []int
	for _, w := range ws {
		out = append(out, w.Delta)
	}
	return out
}

func outcomes(as []rlock.AcquireInfo) []rlock.Outcome {
	var out []rlock.Outcome
	for _, a := range as {
		out = append(out, a.Outcome)
	}
	return out
}

func kinds(as []rlock.AcquireInfo) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.Kind)
	}
	return out
}
