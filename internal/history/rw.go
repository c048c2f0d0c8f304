package history

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Side is the side of a read-write lock an Op acted on.
type Side uint8

// The sides. NoSide is an Op on a lock of another kind, or one that acts
// on the whole read-write lock (Wipe, ForceUnlock, a Lapse of owner -1).
const (
	NoSide Side = iota
	// Read is the shared side (rwlock's ReadLock).
	Read
	// Write is the exclusive side (rwlock's WriteLock).
	Write
)

func (s Side) String() string {
	switch s {
	case Read:
		return "read"
	case Write:
		return "write"
	}
	return ""
}

// MaxRWOwners bounds the owners of a read-write history: owners are 0 to
// MaxRWOwners-1.
const MaxRWOwners = 32

// rwState is the read-write model's state: the writer (owner plus one, 0:
// none) with its write hold count, and every owner's read hold count. An
// array keeps it comparable, as porcupine needs.
type rwState struct {
	writer  int
	wcount  int
	readers [MaxRWOwners]int16
}

func (s rwState) holdsWrite(owner int) bool { return s.writer == owner+1 && s.wcount > 0 }

// othersRead reports whether an owner other than owner holds a read.
func (s rwState) othersRead(owner int) bool {
	for o, n := range s.readers {
		if n > 0 && o != owner {
			return true
		}
	}
	return false
}

func (s rwState) free() bool { return s.writer == 0 && !s.othersRead(-1) }

// countOf is owner's hold count of side.
func (s rwState) countOf(owner int, side Side) int {
	if side == Write {
		if s.holdsWrite(owner) {
			return s.wcount
		}
		return 0
	}
	return int(s.readers[owner])
}

// acquire takes one hold of side for owner if the lock lets it: a write
// when the owner is the writer (re-entry) or nobody holds anything (an
// owner that only reads is refused: an upgrade); a read when there is no
// writer or the owner is the writer (a downgrade's first step).
func (s rwState) acquire(owner int, side Side) (rwState, bool) {
	if side == Write {
		if !s.holdsWrite(owner) && (s.writer != 0 || s.othersRead(-1)) {
			return s, false
		}
		s.writer, s.wcount = owner+1, s.wcount+1
		return s, true
	}
	if s.writer != 0 && !s.holdsWrite(owner) {
		return s, false
	}
	s.readers[owner]++
	return s, true
}

func (s rwState) release(owner int, side Side) (rwState, bool) {
	if s.countOf(owner, side) == 0 {
		return s, false
	}
	if side == Write {
		if s.wcount--; s.wcount == 0 {
			s.writer = 0
		}
		return s, true
	}
	s.readers[owner]--
	return s, true
}

// drop removes every hold of owner on side (NoSide: both).
func (s rwState) drop(owner int, side Side) rwState {
	if side != Read && s.holdsWrite(owner) {
		s.writer, s.wcount = 0, 0
	}
	if side != Write {
		s.readers[owner] = 0
	}
	return s
}

// rwInput is a porcupine Operation's Input in a read-write history.
type rwInput struct {
	owner int
	kind  Kind
	side  Side
}

// rwStep is the nondeterministic step function of the read-write lock:
// every state the lock may be in after the call, empty when the call's
// outcome is impossible in s. A read TryLock may be refused even when no
// writer holds the lock: a waiting writer keeps new readers out, and the
// model does not track waiting writers; an owner's re-entry and a
// writer's read are never refused.
func rwStep(s rwState, in rwInput, o output) []rwState {
	out := o.outcome
	switch in.kind {
	case Lock, TryLock:
		next, ok := s.acquire(in.owner, in.side)
		switch out {
		case OK:
			if ok {
				return []rwState{next}
			}
		case NotObtained:
			if in.kind != TryLock {
				break
			}
			if !ok || in.side == Read && s.countOf(in.owner, Read) == 0 && !s.holdsWrite(in.owner) {
				return []rwState{s}
			}
		case HoldsLost:
			if s.countOf(in.owner, in.side) == 0 {
				return []rwState{s}
			}
		case Unknown:
			if ok {
				return []rwState{s, next}
			}
			return []rwState{s}
		}
	case Unlock:
		next, ok := s.release(in.owner, in.side)
		switch out {
		case OK:
			if ok {
				return []rwState{next}
			}
		case NotHeld:
			if !ok {
				return []rwState{s}
			}
		case Unknown:
			if ok {
				return []rwState{s, next}
			}
			return []rwState{s}
		}
	case Lapse:
		if in.owner < 0 {
			return []rwState{s, {}}
		}
		return []rwState{s, s.drop(in.owner, in.side)}
	case Wipe:
		return []rwState{{}}
	case Count:
		if out == OK && s.countOf(in.owner, in.side) == o.value {
			return []rwState{s}
		}
	case ForceUnlock:
		return forceUnlocked(s, s.free(), o)
	}
	return nil
}

// RWModel returns the porcupine model of a read-write lock (any number of
// readers or one writer, both reentrant per owner, a writer may also
// read), for Operations built by RWOperations.
func RWModel() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{rwState{}} },
		Step: func(st, in, out any) []any {
			return boxed(rwStep(st.(rwState), in.(rwInput), out.(output)))
		},
		DescribeOperation: func(in, out any) string {
			i, o := in.(rwInput), out.(output)
			if i.kind == Count || i.kind == ForceUnlock && o.outcome == OK {
				return fmt.Sprintf("owner %d %v %v -> %d", i.owner, i.kind, i.side, o.value)
			}
			return fmt.Sprintf("owner %d %v %v -> %v", i.owner, i.kind, i.side, o.outcome)
		},
		DescribeState: func(st any) string { return st.(rwState).String() },
	}
	return nm.ToModel()
}

func (s rwState) String() string {
	var parts []string
	if s.writer != 0 {
		parts = append(parts, fmt.Sprintf("writer %d x%d", s.writer-1, s.wcount))
	}
	for o, n := range s.readers {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("reader %d x%d", o, n))
		}
	}
	if len(parts) == 0 {
		return "free"
	}
	return strings.Join(parts, ", ")
}

// RWOperations is Operations for a read-write history: every Op's Side
// is part of its input.
func RWOperations(ops []Op, grace time.Duration) []porcupine.Operation {
	return operations(ops, grace, func(op Op) any { return rwInput{owner: op.Owner, kind: op.Kind, side: op.Side} })
}

// CheckRWLinearizable is CheckLinearizable against the read-write lock
// model (RWModel). Owners must be below MaxRWOwners (other than -1 for a
// Lapse or Wipe of whoever holds); it reports an error otherwise.
func CheckRWLinearizable(ops []Op, grace, timeout time.Duration) (Result, error) {
	for _, op := range ops {
		if op.Owner >= MaxRWOwners || op.Owner < -1 || op.Owner == -1 && op.Kind != Lapse && op.Kind != Wipe {
			return Result{}, fmt.Errorf("history: owner %d out of range for a read-write history (0-%d)", op.Owner, MaxRWOwners-1)
		}
	}
	pops := RWOperations(ops, grace)
	model := RWModel()
	verdict, info := porcupine.CheckOperationsVerbose(model, pops, timeout)
	r := Result{Ops: len(pops), Acquisitions: Acquisitions(ops), Verdict: verdict}
	for _, op := range ops {
		if op.Outcome == Unknown && (op.Kind == Lock || op.Kind == TryLock || op.Kind == Unlock || op.Kind == ForceUnlock) {
			r.Unknown++
		}
	}
	if verdict != porcupine.Ok {
		f, err := os.CreateTemp("", "rlock-rwhistory-*.html")
		if err == nil {
			path := f.Name()
			err = porcupine.Visualize(model, info, f)
			if cerr := f.Close(); err == nil && cerr == nil {
				r.Visualization, _ = filepath.Abs(path)
			}
		}
	}
	return r, nil
}

// RWOverlap is a reader and a writer of different owners, or two writers,
// believing they held a read-write lock at once.
type RWOverlap struct {
	A, B         Belief
	ASide, BSide Side
}

func (o RWOverlap) String() string {
	return fmt.Sprintf("%v owner %d [%v, %v] and %v owner %d [%v, %v]",
		o.ASide, o.A.Owner, time.Duration(o.A.Start), endString(o.A.End),
		o.BSide, o.B.Owner, time.Duration(o.B.Start), endString(o.B.End))
}

// CheckRWExclusive returns every pair of belief periods on a read-write
// lock that must not overlap and do: two writers, or a writer and a reader
// of another owner (an owner that writes may read too). Belief periods
// are derived per side as Beliefs derives them, from the Ops of that side
// (Lost observations carry the side of the holding period they ended).
func CheckRWExclusive(ops []Op) []RWOverlap {
	var reads, writes []Op
	for _, op := range ops {
		switch op.Side {
		case Read:
			reads = append(reads, op)
		case Write:
			writes = append(writes, op)
		}
	}
	wb, rb := Beliefs(writes), Beliefs(reads)
	var res []RWOverlap
	overlap := func(a, b Belief) bool { return a.Owner != b.Owner && a.Start < b.End && b.Start < a.End }
	for i, a := range wb {
		for _, b := range wb[i+1:] {
			if overlap(a, b) {
				res = append(res, RWOverlap{A: a, B: b, ASide: Write, BSide: Write})
			}
		}
		for _, b := range rb {
			if overlap(a, b) {
				res = append(res, RWOverlap{A: a, B: b, ASide: Write, BSide: Read})
			}
		}
	}
	return res
}
