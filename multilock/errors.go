package multilock

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrMemberTimeout is a member's failure in quorum mode when it did not
// answer within the reply wait (WithReplyWait). The member may still run
// the request later; rlock's own locks then give a late grant back by
// themselves (see MultiLock.TryLock).
var ErrMemberTimeout = errors.New("multilock: no reply within the reply wait")

// Failure is what went wrong on one member.
type Failure struct {
	// Index is the member's position in the list given to New.
	Index int
	// Member names the member: its name from WithMemberNames, or
	// `member <Index> ("<lock name>")`.
	Member string
	// Err is the member's error: one wrapping rlock.ErrNotObtained
	// (another owner holds it), rlock.ErrNotHeld (at release),
	// rlock.ErrLockLost (lost while held), ErrMemberTimeout,
	// rlock.ErrClosed, or an error from the Redis client.
	Err error
}

// Error reports an operation that failed on one or more members, naming
// every member that failed and why. It wraps every member's error and,
// where the members' errors do not say it themselves:
// rlock.ErrNotObtained for an acquisition that did not reach its quorum
// (or whose validity was not positive), rlock.ErrNotHeld for a release or
// SetLease that found fewer than the quorum still held, rlock.ErrLockLost
// as the cause of a lost holding period (Err, context.Cause of Ctx). Test
// with errors.Is and get the details with errors.As.
type Error struct {
	// Name is the MultiLock's name (see MultiLock.Name).
	Name string
	// Op is "lock", "unlock", "set lease", "is held" or, for a loss found
	// while held, "hold".
	Op string
	// Quorum is how many members must hold: k in quorum mode, every
	// member otherwise.
	Quorum int
	// Held is how many members were held by the caller's owner when the
	// operation gave up: granted (lock; they were released again), still
	// held (unlock, set lease, hold) or found held (is held).
	Held int
	// Validity is the validity that was left when it was not positive
	// (quorum reached too late), zero otherwise.
	Validity time.Duration
	// Failures lists the members that failed, in member order.
	Failures []Failure

	sentinel error // rlock.ErrNotObtained, ErrNotHeld, ErrLockLost or nil
	late     bool  // quorum reached, validity not positive
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "multilock: %s %q: ", e.Op, e.Name)
	switch {
	case e.late:
		fmt.Fprintf(&b, "quorum reached on %d members but validity %v is not positive", e.Held, e.Validity)
	case e.Op == "lock":
		fmt.Fprintf(&b, "held %d members, quorum %d", e.Held, e.Quorum)
	default:
		fmt.Fprintf(&b, "%d members held, quorum %d", e.Held, e.Quorum)
	}
	for _, f := range e.Failures {
		fmt.Fprintf(&b, "; %s: %v", f.Member, f.Err)
	}
	return b.String()
}

// Unwrap returns the sentinel (if any) and every member's error.
func (e *Error) Unwrap() []error {
	errs := make([]error, 0, len(e.Failures)+1)
	if e.sentinel != nil {
		errs = append(errs, e.sentinel)
	}
	for _, f := range e.Failures {
		errs = append(errs, f.Err)
	}
	return errs
}

// failure returns member i's failure with err.
func (m *MultiLock) failure(i int, err error) Failure {
	return Failure{Index: i, Member: m.labels[i], Err: err}
}

// newError returns an Error of m for op.
func (m *MultiLock) newError(op string, held int, fails []Failure, sentinel error) *Error {
	return &Error{Name: m.Name(), Op: op, Quorum: m.quorum, Held: held, Failures: fails, sentinel: sentinel}
}
