package history

import (
	"fmt"
	"time"
)

// Wait is one waiter of a fair lock: when it started to queue, when it was
// certainly queued (its first attempt returned, having joined the queue),
// and when its grant returned.
type Wait struct {
	Owner    int
	JoinCall int64 // the first attempt was sent
	Joined   int64 // the first attempt returned: the waiter is queued
	Granted  int64 // the acquire that got the lock returned
}

// FIFOViolation is a waiter granted after one that queued behind it.
type FIFOViolation struct {
	First, Second Wait // First was queued before Second joined
}

func (v FIFOViolation) String() string {
	return fmt.Sprintf("owner %d queued at %v before owner %d joined at %v, but was granted at %v after it (%v)",
		v.First.Owner, time.Duration(v.First.Joined), v.Second.Owner, time.Duration(v.Second.JoinCall),
		time.Duration(v.First.Granted), time.Duration(v.Second.Granted))
}

// CheckFIFO checks grant order against queue order: whenever a waiter was
// certainly queued (Joined) before another started to join (JoinCall), it
// must have been granted first. Waiters whose queue positions may have
// been concurrent are not compared. A mutex grants one waiter at a time,
// so comparing the grants' return times is sound.
func CheckFIFO(waits []Wait) []FIFOViolation {
	var res []FIFOViolation
	for _, a := range waits {
		for _, b := range waits {
			if a.Owner != b.Owner && a.Joined < b.JoinCall && a.Granted > b.Granted {
				res = append(res, FIFOViolation{First: a, Second: b})
			}
		}
	}
	return res
}
