package history

import (
	"fmt"
	"slices"
	"time"
)

// Belief is one period in which an owner believed it held the lock: from
// the return of the acquire that took its own hold count from 0 to 1, to the
// call of the unlock meant to release its last hold, or to the moment it was
// told the lock was lost (a Lost observation, or an unlock answered
// ErrNotHeld). End is Forever for a period still open at the end.
type Belief struct {
	Owner      int
	Start, End int64
}

// Overlap is two owners believing they held the lock at the same time.
type Overlap struct {
	A, B Belief
}

func (o Overlap) String() string {
	return fmt.Sprintf("owner %d [%v, %v] and owner %d [%v, %v]",
		o.A.Owner, time.Duration(o.A.Start), endString(o.A.End),
		o.B.Owner, time.Duration(o.B.Start), endString(o.B.End))
}

func endString(t int64) string {
	if t == Forever {
		return "inf"
	}
	return time.Duration(t).String()
}

// Beliefs derives every owner's belief periods from ops. Each owner's
// calls must be sequential (one goroutine per owner), as a lock's users'
// are. An owner's own hold count moves as it was told: +1 per successful
// acquire, -1 per successful unlock, 0 after ErrNotHeld, ErrLockLost from
// a re-entry, or a Lost observation, and is set by a Count read; Unknown
// calls change nothing (the caller retries them, or reads its count).
// ForceUnlock calls end nobody's belief: a holder believes until it is
// told.
func Beliefs(ops []Op) []Belief {
	type ownerState struct {
		count int
		open  bool
		start int64
		last  int // index in res of the owner's last closed belief; -1: none
	}
	owners := map[int]*ownerState{}
	var res []Belief
	end := func(owner int, st *ownerState, at int64) {
		if st.open {
			st.last = len(res)
			res = append(res, Belief{Owner: owner, Start: st.start, End: at})
			st.open = false
		}
	}
	for _, op := range ops { // ordered by call time
		st := owners[op.Owner]
		if st == nil {
			st = &ownerState{last: -1}
			owners[op.Owner] = st
		}
		switch op.Kind {
		case Lock, TryLock:
			switch op.Outcome {
			case OK:
				if st.count == 0 && !st.open {
					st.open, st.start = true, op.Return
				}
				st.count++
			case HoldsLost:
				end(op.Owner, st, op.Return) // told now, if not before
				st.count = 0
			}
		case Unlock:
			if st.count <= 1 {
				end(op.Owner, st, op.Call)
			}
			switch op.Outcome {
			case OK:
				st.count = max(st.count-1, 0)
			case NotHeld:
				end(op.Owner, st, op.Return) // told now, if not before
				st.count = 0
			}
		case Count:
			// The owner learns its hold count (after a call whose outcome
			// was unknown): a belief starts or ends here if the count says
			// so.
			if op.Value > 0 && !st.open {
				st.open, st.start = true, op.Return
			}
			if op.Value == 0 {
				end(op.Owner, st, op.Return)
			}
			st.count = op.Value
		case Lost:
			if !st.open {
				// Told while a call that ended the belief later (an unlock
				// answered ErrNotHeld after a frozen server resumed) was in
				// flight: the belief ended when it was told.
				if i := st.last; i >= 0 && res[i].Start <= op.Call && op.Call < res[i].End {
					res[i].End = op.Call
				}
			}
			end(op.Owner, st, op.Call)
			st.count = 0
		}
	}
	for owner, st := range owners {
		end(owner, st, Forever)
	}
	slices.SortFunc(res, func(a, b Belief) int {
		switch {
		case a.Start < b.Start:
			return -1
		case a.Start > b.Start:
			return 1
		}
		return a.Owner - b.Owner
	})
	return res
}

// CheckExclusive returns every pair of belief periods of different owners
// that overlap: two owners that believed they held the lock at once.
func CheckExclusive(ops []Op) []Overlap {
	bs := Beliefs(ops)
	var res []Overlap
	for i, a := range bs {
		for _, b := range bs[i+1:] {
			if b.Start >= a.End {
				break // sorted by start: no later one overlaps a either
			}
			if a.Owner != b.Owner && b.Start < a.End && a.Start < b.End {
				res = append(res, Overlap{A: a, B: b})
			}
		}
	}
	return res
}
