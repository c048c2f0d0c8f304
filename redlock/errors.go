package redlock

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrNodeTimeout is a node's failure when it did not answer within the
// per-node wait. The node may still run the request later: a grant that
// arrives late is released again (see RedLock.TryLock).
var ErrNodeTimeout = errors.New("redlock: no reply within the per-node wait")

// NodeFailure is what went wrong on one node.
type NodeFailure struct {
	// Index is the node's position in the list given to New.
	Index int
	// Node is the node's name (WithNodeNames), or "node <Index>".
	Node string
	// Err is the node's error: one wrapping rlock.ErrNotObtained (another
	// owner holds the lock there), rlock.ErrNotHeld (at release),
	// ErrNodeTimeout, rlock.ErrClosed, or an error from the Redis client.
	Err error
}

// NodeError reports an acquisition or release that failed on too many
// nodes, naming every node that failed and why. It wraps every node's
// error and, for an acquisition that did not reach a quorum (or whose
// validity was not positive), rlock.ErrNotObtained; for a release that
// found fewer than a quorum of nodes still held, rlock.ErrNotHeld. As the
// reason of a lost holding (Err), it wraps rlock.ErrLockLost. Test with
// errors.Is and get the details with errors.As.
type NodeError struct {
	// Name is the lock's name.
	Name string
	// Op is "lock", "unlock", "set lease" or, for a loss found while
	// held, "hold".
	Op string
	// Quorum is how many nodes must agree: n/2+1 of n.
	Quorum int
	// Held is how many nodes granted (lock; they were released again) or
	// still held the lock (unlock).
	Held int
	// Validity is the validity that was left when it was not positive
	// (quorum reached too late), zero otherwise.
	Validity time.Duration
	// Failures lists the nodes that failed, in node order.
	Failures []NodeFailure

	sentinel error // rlock.ErrNotObtained, rlock.ErrNotHeld, rlock.ErrLockLost or nil
	late     bool  // quorum reached, validity not positive
}

func (e *NodeError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "redlock: %s %q: ", e.Op, e.Name)
	switch {
	case e.late:
		fmt.Fprintf(&b, "quorum reached on %d nodes but validity %v is not positive", e.Held, e.Validity)
	case e.Op == "lock":
		fmt.Fprintf(&b, "granted by %d nodes, quorum %d", e.Held, e.Quorum)
	default:
		fmt.Fprintf(&b, "%d nodes still held it, quorum %d", e.Held, e.Quorum)
	}
	for _, f := range e.Failures {
		fmt.Fprintf(&b, "; %s: %v", f.Node, f.Err)
	}
	return b.String()
}

// Unwrap returns the sentinel (if any) and every node's error.
func (e *NodeError) Unwrap() []error {
	errs := make([]error, 0, len(e.Failures)+1)
	if e.sentinel != nil {
		errs = append(errs, e.sentinel)
	}
	for _, f := range e.Failures {
		errs = append(errs, f.Err)
	}
	return errs
}

var _ interface{ Unwrap() []error } = (*NodeError)(nil)
