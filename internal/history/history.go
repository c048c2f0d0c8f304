package history

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/rlock-go/rlock/internal/base"
)

// Kind is what an Op did.
type Kind uint8

// The kinds of Op.
const (
	// Lock is a blocking acquire (Lock).
	Lock Kind = iota + 1
	// TryLock is a single acquire attempt.
	TryLock
	// Unlock releases one hold.
	Unlock
	// Lost is an observation, not a call: the owner was told (Done closed
	// with ErrLockLost) that its lock was lost. Call and Return are the
	// moment it was observed. The mutex model ignores it; CheckExclusive
	// ends the owner's belief there.
	Lost
	// Lapse marks that the owner's hold may vanish without an unlock at one
	// moment between Call and Return (its lease runs out unrenewed: a
	// killed holder, a frozen server). Return may be Forever. Owner -1 is
	// whoever holds the lock at that moment.
	Lapse
	// Wipe is the server losing every lock at one moment between Call and
	// Return (killed and restarted without persistence). Owner is ignored.
	Wipe
	// Count is a read of the owner's hold count (HoldCount); Value is the
	// count read. Only reads that returned are recorded. It changes
	// nothing, but pins down what the owner's earlier calls with an
	// unknown outcome did.
	Count
	// ForceUnlock deletes the lock whoever holds it. Value is its reply:
	// 1 if it deleted a lock, 0 if there was none. Owner is the caller,
	// who need not hold the lock.
	ForceUnlock
)

func (k Kind) String() string {
	switch k {
	case Lock:
		return "Lock"
	case TryLock:
		return "TryLock"
	case Unlock:
		return "Unlock"
	case Lost:
		return "Lost"
	case Lapse:
		return "Lapse"
	case Wipe:
		return "Wipe"
	case Count:
		return "Count"
	case ForceUnlock:
		return "ForceUnlock"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Outcome is how a call ended.
type Outcome uint8

// The outcomes.
const (
	// OK: the call succeeded (acquired, re-entered, released one hold).
	OK Outcome = iota + 1
	// NotObtained: a TryLock found the lock held by another owner.
	NotObtained
	// NotHeld: an Unlock found the owner holding nothing.
	NotHeld
	// Unknown: any other error; the call may or may not have taken effect,
	// at any moment after it was made.
	Unknown
	// HoldsLost: a Lock or TryLock by an owner that believed it held the
	// lock found its holds gone (base.ErrLockLost); nothing was acquired.
	HoldsLost
)

func (o Outcome) String() string {
	switch o {
	case OK:
		return "ok"
	case NotObtained:
		return "not-obtained"
	case NotHeld:
		return "not-held"
	case Unknown:
		return "unknown"
	case HoldsLost:
		return "holds-lost"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// Forever is the Return of an Op whose effect may come at any later time.
const Forever int64 = math.MaxInt64

// Op is one recorded call or observation. Times are nanoseconds on the
// Recorder's monotonic clock.
type Op struct {
	Owner   int
	Kind    Kind
	Outcome Outcome
	Call    int64
	Return  int64
	Value   int   // Count: the count read; ForceUnlock: 1 if it deleted a lock
	Err     error // the error the call returned, if any
	// Side is the side of a read-write lock the Op acted on (NoSide for
	// other lock kinds); see CheckRWLinearizable.
	Side Side
}

func (op Op) String() string {
	ret := "inf"
	if op.Return != Forever {
		ret = time.Duration(op.Return).String()
	}
	kind := op.Kind.String()
	if op.Side != NoSide {
		kind += " " + op.Side.String()
	}
	s := fmt.Sprintf("owner %d %s -> %v [%v, %s]", op.Owner, kind, op.Outcome, time.Duration(op.Call), ret)
	if op.Kind == Count || op.Kind == ForceUnlock && op.Outcome == OK {
		s = fmt.Sprintf("owner %d %s -> %d [%v, %s]", op.Owner, kind, op.Value, time.Duration(op.Call), ret)
	}
	if op.Err != nil {
		s += ": " + op.Err.Error()
	}
	return s
}

// Classify maps the error of a call of kind k to its Outcome.
func Classify(k Kind, err error) Outcome {
	switch {
	case err == nil:
		return OK
	case k == TryLock && errors.Is(err, base.ErrNotObtained):
		return NotObtained
	case (k == Lock || k == TryLock) && errors.Is(err, base.ErrLockLost):
		return HoldsLost
	case k == Unlock && errors.Is(err, base.ErrNotHeld):
		return NotHeld
	}
	return Unknown
}

// Recorder collects Ops from many goroutines. The zero value is not usable;
// create one with NewRecorder. Its methods are safe for concurrent use.
type Recorder struct {
	start time.Time
	mu    sync.Mutex
	ops   []Op
}

// NewRecorder returns an empty Recorder whose clock starts now.
func NewRecorder() *Recorder {
	return &Recorder{start: time.Now()}
}

// Now returns the Recorder's clock: nanoseconds since NewRecorder
// (monotonic).
func (r *Recorder) Now() int64 {
	return int64(time.Since(r.start))
}

// Add records op as it is.
func (r *Recorder) Add(op Op) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// Do runs fn as a call of kind k by owner, records it with its times and
// classified outcome, and returns both.
func (r *Recorder) Do(owner int, k Kind, fn func() error) (Outcome, error) {
	call := r.Now()
	err := fn()
	ret := r.Now()
	out := Classify(k, err)
	r.Add(Op{Owner: owner, Kind: k, Outcome: out, Call: call, Return: ret, Err: err})
	return out, err
}

// Lost records that owner was told, now, that its lock was lost.
func (r *Recorder) Lost(owner int) {
	now := r.Now()
	r.Add(Op{Owner: owner, Kind: Lost, Outcome: OK, Call: now, Return: now})
}

// Lapse records that owner's hold may vanish without an unlock at one
// moment between from and to (Recorder times; to may be Forever). Owner -1
// stands for whoever holds the lock then.
func (r *Recorder) Lapse(owner int, from, to int64) {
	r.Add(Op{Owner: owner, Kind: Lapse, Outcome: Unknown, Call: from, Return: to})
}

// Wipe records that the server lost every lock at one moment between from
// and to (Recorder times).
func (r *Recorder) Wipe(from, to int64) {
	r.Add(Op{Owner: -1, Kind: Wipe, Outcome: OK, Call: from, Return: to})
}

// Ops returns a copy of the recorded Ops, ordered by call time.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	ops := slices.Clone(r.ops)
	r.mu.Unlock()
	slices.SortStableFunc(ops, func(a, b Op) int {
		switch {
		case a.Call < b.Call:
			return -1
		case a.Call > b.Call:
			return 1
		}
		return 0
	})
	return ops
}

// Acquisitions counts the successful Lock and TryLock calls in ops
// (re-entries included).
func Acquisitions(ops []Op) int {
	n := 0
	for _, op := range ops {
		if (op.Kind == Lock || op.Kind == TryLock) && op.Outcome == OK {
			n++
		}
	}
	return n
}
