package faults

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/history"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/rwlock"
)

// TestFaultRW runs the read-write lock through faults with the read-write
// history checks (history.CheckRWLinearizable, history.CheckRWExclusive)
// and the fencing-token check of its write holds: no fault, latency,
// replies lost after the script ran (go-redis re-sending them), and
// connection resets. Workers mostly read (3 holding periods in 4), re-enter
// 0-2 times, and a writer's re-entries are now and then reads, which it
// keeps for a while after releasing its writes (a downgrade).
func TestFaultRW(t *testing.T) {
	cases := []struct {
		name   string
		inject func(r *rig, stop <-chan struct{})
	}{
		{"rw: none", nil},
		{"rw: latency 0-20 ms", func(r *rig, stop <-chan struct{}) {
			on := false
			every(50*time.Millisecond, stop, func() {
				if on = !on; on {
					r.proxy.SetLatency(time.Duration(1+time.Now().UnixNano()%20) * time.Millisecond)
				} else {
					r.proxy.SetLatency(0)
				}
			})
		}},
		{"rw: reply lost after the command ran", func(r *rig, stop <-chan struct{}) {
			every(25*time.Millisecond, stop, func() { dropSome(r, 1) })
			r.proxy.DropNextReply("\x00never\x00") // disarm
			r.t.Logf("replies dropped: %d", r.proxy.Dropped())
		}},
		{"rw: connection reset", func(r *rig, stop <-chan struct{}) {
			every(60*time.Millisecond, stop, r.proxy.ResetAll)
		}},
	}
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(strings.TrimPrefix(tc.name, "rw: "), " ", "_"), func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				cfg := baseConfig(tc.name)
				cfg.rw = true
				cfg.viaProxy = true
				cfg.inject = tc.inject
				r := newRig(t, b, cfg)
				r.run(func() { r.proxy.SetLatency(0) })
			})
		})
	}
}

// sideHandle is one side of a read-write lock, as the workers use it.
type sideHandle interface {
	rlock.Locker
	HoldCount(ctx context.Context) (int, error)
	Done() <-chan struct{}
}

// newRWHandles gives w a fenced read-write lock on name; w.l is its write
// side (for the token and end checks shared with the other lock kinds).
func (r *rig) newRWHandles(w *worker, c *rlock.Client, name string) {
	l, err := rwlock.New(c, name, rwlock.WithFencing())
	require.NoError(r.t, err)
	w.rw = l
	w.l = l.WriteLock()
}

// side is one side's holding period in a round of a read-write worker.
type side struct {
	s     history.Side
	h     sideHandle
	count int
	done  <-chan struct{} // the holding period's Done; nil: not watched (never closes)
	cw    *closeWatch
}

func (w *worker) side(s history.Side) *side {
	if s == history.Write {
		return &side{s: s, h: w.rw.WriteLock()}
	}
	return &side{s: s, h: w.rw.ReadLock()}
}

// watch starts watching the holding period's Done when the call that
// began it was answered (a hold learnt from a count read has none).
func (w *worker) watchSide(sd *side, answered bool) {
	if answered {
		sd.done = sd.h.Done()
	}
	sd.cw = w.watch(sd.done)
}

// rwDo is do for one side of the read-write lock: it makes a logical call
// of kind k on sd and updates sd.count.
func (w *worker) rwDo(sd *side, k history.Kind) (out history.Outcome, answered bool, err error) {
	fn := sd.h.Unlock
	switch k {
	case history.Lock:
		fn = sd.h.Lock
	case history.TryLock:
		fn = sd.h.TryLock
	}
	for {
		out, err = w.rwOnce(sd, k, fn)
		if err != nil || out != history.Unknown {
			return out, err == nil, err
		}
		if k == history.Unlock {
			return history.OK, false, nil // completed by the library
		}
		timer := time.NewTimer(5 * time.Millisecond) // backoff
		select {
		case <-timer.C:
		case <-w.r.ctx.Done():
			timer.Stop()
		}
	}
}

// rwOnce is onceFn for one side: one attempt, recorded with its side; an
// unknown outcome is followed by a read of the side's hold count.
func (w *worker) rwOnce(sd *side, k history.Kind, fn func(context.Context) error) (history.Outcome, error) {
	ctx := w.ctx()
	defer w.act.begin(k == history.Unlock)() // through the count read below
	call := w.r.rec.Now()
	err := fn(ctx)
	out := history.Classify(k, err)
	w.r.rec.Add(history.Op{Owner: w.id, Side: sd.s, Kind: k, Outcome: out, Call: call, Return: w.r.rec.Now(), Err: err})
	switch out {
	case history.OK:
		if k == history.Unlock {
			sd.count--
		} else {
			sd.count++
		}
		return out, nil
	case history.NotObtained, history.NotHeld, history.HoldsLost:
		sd.count = 0 // refused, a re-entry refused, or a release of nothing: no holds
		return out, nil
	}
	if ctx.Err() != nil {
		return out, fmt.Errorf("%v %v still failing at the end of the run: %w", k, sd.s, err)
	}
	w.unknown++
	if k != history.Unlock {
		// The library gives back a hold the acquisition may have taken.
		w.r.rec.Add(history.Op{Owner: w.id, Side: sd.s, Kind: history.Unlock, Outcome: history.Unknown, Call: call, Return: w.r.rec.Now()})
	}
	if err := w.readSideCount(sd); err != nil {
		return out, err
	}
	if k == history.Unlock {
		sd.count--
	}
	return out, nil
}

// readSideCount reads sd's hold count until it answers, and records it.
func (w *worker) readSideCount(sd *side) error {
	ctx := w.ctx()
	for {
		call := w.r.rec.Now()
		n, err := sd.h.HoldCount(ctx)
		if err == nil {
			w.r.rec.Add(history.Op{Owner: w.id, Side: sd.s, Kind: history.Count, Outcome: history.OK, Call: call, Return: w.r.rec.Now(), Value: n})
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("reading the hold count at the end of the run: %w", err)
		}
		if sleepOrStop(5*time.Millisecond, ctx.Done()) {
			return ctx.Err()
		}
	}
}

// roundRW is one holding period on the read-write lock: a read (3 in 4)
// or a write, by Lock or by a TryLock that may be refused; 0-2 re-entries
// (a writer's are reads half the time); a critical section until done or
// told of a loss; then the writes released, the reads kept for another
// section (a downgrade) and released.
func (w *worker) roundRW() error {
	mainSide := history.Read
	if w.rng.IntN(4) == 0 {
		mainSide = history.Write
	}
	first := history.Lock
	if w.rng.IntN(4) == 0 {
		first = history.TryLock
	}
	main := w.side(mainSide)
	call := w.r.rec.Now()
	_, answered, err := w.rwDo(main, first)
	if err != nil || main.count == 0 {
		return err
	}
	w.acquired++
	var token int64
	if mainSide == history.Write && answered {
		token = w.rw.WriteLock().Token()
		w.r.grantsMu.Lock()
		w.r.grants = append(w.r.grants, grant{owner: w.id, call: call, ret: w.r.rec.Now(), token: token})
		w.r.grantsMu.Unlock()
	}
	w.watchSide(main, answered)
	defer main.cw.end()
	var reads *side // a writer's read holds
	lost := false
	for range w.rng.IntN(3) {
		sd := main
		if mainSide == history.Write && w.rng.IntN(2) == 0 {
			if reads == nil {
				reads = w.side(history.Read)
			}
			sd = reads
		}
		k := history.Lock
		if w.rng.IntN(2) == 0 {
			k = history.TryLock
		}
		before := sd.count
		out, answered, err := w.rwDo(sd, k)
		if err != nil {
			return err
		}
		if sd == reads && before == 0 && reads.count > 0 && reads.cw == nil {
			w.watchSide(reads, answered)
			defer reads.cw.end()
		}
		if sd == main && out == history.OK && answered && main.done != nil && !closed(main.done) && mainSide == history.Write && w.rw.WriteLock().Token() != token {
			w.r.grantsMu.Lock()
			w.r.tokenMismatch++
			w.r.grantsMu.Unlock()
		}
		if out == history.NotObtained || out == history.HoldsLost || closed(main.done) {
			lost = true
			break
		}
	}
	if !lost {
		lost = w.section(main.done)
	}
	if err := w.endSide(main, lost); err != nil {
		return err
	}
	if reads != nil && (reads.count > 0 || reads.cw != nil) {
		lostReads := lost || reads.cw == nil
		if !lostReads {
			lostReads = w.section(reads.done) // downgraded: reading on
		}
		if err := w.endSide(reads, lostReads); err != nil {
			return err
		}
	}
	return nil
}

// section works inside the critical section for up to cfg.section, and
// reports whether done closed (a loss) meanwhile.
func (w *worker) section(done <-chan struct{}) (lost bool) {
	select {
	case w.r.inside <- w.id:
	default:
	}
	timer := time.NewTimer(time.Duration(w.rng.Int64N(int64(w.r.cfg.section) + 1)))
	defer timer.Stop()
	select {
	case <-done:
		return true
	case <-timer.C:
		return false
	}
}

// endSide releases every hold of sd (after a loss: until the library says
// nothing is held) and records the loss the worker was told of, as round
// does.
func (w *worker) endSide(sd *side, lost bool) error {
	releaseCall := w.r.rec.Now()
	if lost {
		for range sd.count + 1 {
			out, _, err := w.rwDo(sd, history.Unlock)
			if err != nil {
				return err
			}
			if out == history.NotHeld {
				break
			}
		}
	} else {
		for sd.count > 0 {
			out, _, err := w.rwDo(sd, history.Unlock)
			if err != nil {
				return err
			}
			if out == history.NotHeld {
				lost = true
				break
			}
		}
	}
	if sd.cw == nil {
		return nil
	}
	if at := sd.cw.end(); at != 0 && (at < releaseCall || lost) {
		lost = true
		w.r.rec.Add(history.Op{Owner: w.id, Side: sd.s, Kind: history.Lost, Outcome: history.OK, Call: at, Return: at})
	}
	if lost {
		w.lost++
	}
	return nil
}

// checkRWHistory is checkHistory's read-write part: it fills res's
// linearizability and exclusion figures.
func (r *rig) checkRWHistory(ops []history.Op, res *row) {
	t := r.t
	if r.cfg.linearizable {
		start := time.Now()
		lr, err := history.CheckRWLinearizable(ops, r.cfg.grace, time.Minute)
		require.NoError(t, err)
		t.Logf("%s: porcupine checked %d ops (%d unknown) against the read-write model in %v: %v", r.cfg.fault, lr.Ops, lr.Unknown, time.Since(start).Round(time.Millisecond), lr.Verdict)
		if lr.Verdict != porcupine.Ok {
			res.linViolations = 1
			t.Errorf("history is not linearizable against the read-write model (%v); visualization: %s; history: %s", lr.Verdict, lr.Visualization, dump(ops))
		}
	}
	logUnknown(t, r.cfg.fault, ops)
	if r.cfg.exclusive {
		overlaps := history.CheckRWExclusive(ops)
		res.overlaps = len(overlaps)
		for i, o := range overlaps {
			if i < 3 {
				t.Errorf("a writer and another holder believed they held the read-write lock at once: %s", r.explainRWOverlap(ops, o))
				continue
			}
			t.Errorf("a writer and another holder believed they held the read-write lock at once: %v", o)
		}
	}
}

// checkRWEnd is checkEnd's read-write part: no worker still reads.
func (r *rig) checkRWEnd() {
	for _, w := range r.workers {
		n, err := w.rw.ReadLock().HoldCount(context.Background())
		require.NoError(r.t, err)
		assert.Zero(r.t, n, "worker %d still holds the read lock", w.id)
	}
}

// TestFaultRWBlackhole runs the read-write workload through the proxy
// swallowing everything for 200 ms every 300 ms (client timeouts 100 ms),
// under the history checks and the holder-vs-server check.
func TestFaultRWBlackhole(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		cfg := withBlackholes(baseConfig("rw: blackhole 200 ms"), 300*time.Millisecond, 0)
		cfg.rw = true
		runBlackholes(t, b, cfg)
	})
}

// TestFaultRWFreeze is TestFaultFreeze for the read-write workload: the
// server is stopped with SIGSTOP for 1.5 s, past the 500 ms watchdog
// lease, while a worker holds; the holds at the freeze expire (a Lapse of
// whoever holds), and the holder-vs-server check samples throughout.
func TestFaultRWFreeze(t *testing.T) {
	b := redistest.Real(t)
	cfg := baseConfig("rw: server frozen past the lease (SIGSTOP)")
	cfg.rw = true
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
			r.rec.Lapse(-1, from, r.rec.Now())
			if sleepOrStop(200*time.Millisecond, stop) {
				return
			}
		}
	}
	r := newRig(t, b, cfg)
	r.run(b.Real.Thaw)
	require.Equal(t, want, freezes)
}

// TestFaultRWRestart is TestFaultRestart for the read-write workload: the
// server is killed and restarted while a worker holds (a Wipe in the
// model); holders believe until told, so neither the exclusion check nor
// the Cover half of the holder-vs-server check applies (Orphan does).
func TestFaultRWRestart(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		cfg := baseConfig("rw: server killed and restarted")
		cfg.rw = true
		cfg.lease = time.Second
		cfg.section = 50 * time.Millisecond
		cfg.exclusive = false
		cfg.tokensReset = true
		cfg.noCover = true
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
	})
}

// logUnknown logs why calls had an unknown outcome: each distinct error
// (the lock's name cut off) with how many calls it ended.
func logUnknown(t *testing.T, fault string, ops []history.Op) {
	counts := map[string]int{}
	var order []string
	for _, op := range ops {
		if op.Outcome != history.Unknown || op.Err == nil {
			continue
		}
		msg := op.Err.Error()
		if i := strings.LastIndex(msg, "\": "); i >= 0 {
			msg = msg[i+3:]
		}
		if counts[msg] == 0 {
			order = append(order, msg)
		}
		counts[msg]++
	}
	for _, msg := range order {
		t.Logf("%s: %d calls with an unknown outcome: %s", fault, counts[msg], msg)
	}
}
