package history

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/anishathalye/porcupine"
)

// state is the mutex model's state: holder is the owner plus one (0: free)
// and count the holder's hold count.
type state struct {
	holder int
	count  int
}

func (s state) holds(owner int) bool { return s.holder == owner+1 && s.count > 0 }

func (s state) acquire(owner int) (state, bool) {
	if s.holder != 0 && !s.holds(owner) {
		return s, false
	}
	return state{holder: owner + 1, count: s.count + 1}, true
}

// countOf is owner's hold count in s.
func (s state) countOf(owner int) int {
	if s.holds(owner) {
		return s.count
	}
	return 0
}

func (s state) release(owner int) (state, bool) {
	if !s.holds(owner) {
		return s, false
	}
	if s.count == 1 {
		return state{}, true
	}
	return state{holder: s.holder, count: s.count - 1}, true
}

// input is a porcupine Operation's Input.
type input struct {
	owner int
	kind  Kind
}

// output is a porcupine Operation's Output: the outcome, and the value
// read (Count) or replied (ForceUnlock).
type output struct {
	outcome Outcome
	value   int
}

// step is the nondeterministic step function of the reentrant mutex (see
// the package documentation): every state the lock may be in after the
// call, empty when the call's outcome is impossible in s.
func step(s state, in input, o output) []state {
	out := o.outcome
	switch in.kind {
	case Lock, TryLock:
		next, ok := s.acquire(in.owner)
		switch out {
		case OK:
			if ok {
				return []state{next}
			}
		case NotObtained:
			if in.kind == TryLock && !ok {
				return []state{s}
			}
		case HoldsLost:
			// Legal only when the owner's holds are gone (lapsed or wiped):
			// it holds nothing in s. Nothing changes.
			if !s.holds(in.owner) {
				return []state{s}
			}
		case Unknown:
			if ok {
				return []state{s, next}
			}
			return []state{s}
		}
	case Unlock:
		next, ok := s.release(in.owner)
		switch out {
		case OK:
			if ok {
				return []state{next}
			}
		case NotHeld:
			if !ok {
				return []state{s}
			}
		case Unknown:
			if ok {
				return []state{s, next}
			}
			return []state{s}
		}
	case Lapse:
		if in.owner < 0 && s.holder != 0 || s.holds(in.owner) {
			return []state{s, {}}
		}
		return []state{s}
	case Wipe:
		return []state{{}}
	case Count:
		if out == OK && s.countOf(in.owner) == o.value {
			return []state{s}
		}
	case ForceUnlock:
		return forceUnlocked(s, s.holder == 0, o)
	}
	return nil
}

// forceUnlocked returns the states a ForceUnlock answered o leaves from s,
// in which the lock is free or not: the free state when it ran (answering
// 1 on a held lock, 0 on a free one), s or that when its outcome is
// unknown, none for an answer s cannot give.
func forceUnlocked[S any](s S, free bool, o output) []S {
	var none S
	switch {
	case o.outcome == Unknown:
		return []S{s, none}
	case o.outcome == OK && (o.value == 1 && !free || o.value == 0 && free):
		return []S{none}
	}
	return nil
}

// Model returns the porcupine model of an owner-aware reentrant mutex on
// one lock, for Operations built by Operations.
func Model() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{state{}} },
		Step: func(st, in, out any) []any {
			return boxed(step(st.(state), in.(input), out.(output)))
		},
		DescribeOperation: func(in, out any) string {
			i, o := in.(input), out.(output)
			if i.kind == Count || i.kind == ForceUnlock && o.outcome == OK {
				return fmt.Sprintf("owner %d %v -> %d", i.owner, i.kind, o.value)
			}
			return fmt.Sprintf("owner %d %v -> %v", i.owner, i.kind, o.outcome)
		},
		DescribeState: func(st any) string {
			s := st.(state)
			if s.holder == 0 {
				return "free"
			}
			return fmt.Sprintf("owner %d x%d", s.holder-1, s.count)
		},
	}
	return nm.ToModel()
}

// Operations converts ops to porcupine operations: Lost observations are
// left out, and an Unknown call may take effect until grace after it
// returned (Forever when grace is negative).
func Operations(ops []Op, grace time.Duration) []porcupine.Operation {
	return operations(ops, grace, func(op Op) any { return input{owner: op.Owner, kind: op.Kind} })
}

// operations is Operations with the model's input of each Op.
func operations(ops []Op, grace time.Duration, in func(Op) any) []porcupine.Operation {
	res := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		if op.Kind == Lost {
			continue
		}
		ret := op.Return
		if op.Outcome == Unknown && op.Kind != Wipe && ret != Forever {
			if grace < 0 || ret > Forever-int64(grace) {
				ret = Forever
			} else {
				ret += int64(grace)
			}
		}
		client := op.Owner
		if client < 0 {
			client = 0
		}
		res = append(res, porcupine.Operation{
			ClientId: client,
			Input:    in(op),
			Call:     op.Call,
			Output:   output{outcome: op.Outcome, value: op.Value},
			Return:   ret,
		})
	}
	return res
}

// Result is the outcome of CheckLinearizable.
type Result struct {
	// Ops is the number of calls and events checked (Lost observations
	// excluded).
	Ops int
	// Acquisitions is the number of successful Lock and TryLock calls.
	Acquisitions int
	// Unknown is the number of calls whose outcome was unknown.
	Unknown int
	// Verdict is porcupine's: Ok, Illegal, or Unknown (timed out).
	Verdict porcupine.CheckResult
	// Visualization is the path of porcupine's HTML rendering of the
	// history, written when the verdict is not Ok (empty otherwise or when
	// writing failed).
	Visualization string
}

// CheckLinearizable checks ops against the reentrant mutex model with
// porcupine, giving up after timeout (0: no limit). An Unknown call may
// take effect at any moment from its call until grace after its return;
// a negative grace means any later moment. When the history is not
// linearizable it writes porcupine's visualization to a temporary file
// named in the Result.
//
// How long an unknown call's effect may trail its return depends on the
// fault: a reply dropped after the command ran, a reset connection or a
// refused one leave nothing behind once the call has returned (a command
// already in the server's socket runs at once), so a short grace is
// honest there; a frozen server runs queued commands whenever it resumes,
// which needs a negative grace. An unbounded grace is exact but makes the
// check exponential in the number of unknown calls.
func CheckLinearizable(ops []Op, grace, timeout time.Duration) Result {
	pops := Operations(ops, grace)
	model := Model()
	verdict, info := porcupine.CheckOperationsVerbose(model, pops, timeout)
	r := Result{Ops: len(pops), Acquisitions: Acquisitions(ops), Verdict: verdict}
	for _, op := range ops {
		if op.Outcome == Unknown && (op.Kind == Lock || op.Kind == TryLock || op.Kind == Unlock || op.Kind == ForceUnlock) {
			r.Unknown++
		}
	}
	if verdict != porcupine.Ok {
		f, err := os.CreateTemp("", "rlock-history-*.html")
		if err == nil {
			path := f.Name()
			err = porcupine.Visualize(model, info, f)
			if cerr := f.Close(); err == nil && cerr == nil {
				r.Visualization, _ = filepath.Abs(path)
			}
		}
	}
	return r
}

// boxed returns states as porcupine's nondeterministic Step answers them.
func boxed[S any](states []S) []any {
	res := make([]any, len(states))
	for i, st := range states {
		res[i] = st
	}
	return res
}
