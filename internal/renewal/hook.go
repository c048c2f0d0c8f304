package renewal

import (
	"fmt"
	"time"

	"github.com/rlock-go/rlock/internal/base"
)

// Round is what one renewal round on one node did, for a round hook.
type Round struct {
	Node    string        // the node's address (or its client's name)
	Locks   int           // locks the round carried
	Renewed int           // of them, renewed
	NotHeld int           // of them, found no longer held (reported lost)
	Failed  int           // of them, whose renewal failed (retried)
	Latency time.Duration // from the first request sent to the last reply
	Err     error         // why the failed ones failed; nil if none did
}

// WithRoundHook adds f, called on the scheduler's goroutine after every
// renewal round with what it did; it must be fast and must not call the
// scheduler. f must not be nil.
func WithRoundHook(f func(Round)) Option {
	return func(s *Scheduler) error {
		if f == nil {
			return fmt.Errorf("%w: nil round hook", base.ErrInvalidArgument)
		}
		s.hooks = append(s.hooks, f)
		return nil
	}
}

// roundDone reports a round to the hooks.
func (s *Scheduler) roundDone(r *round, renewed, notHeld, failed int) {
	if len(s.hooks) == 0 {
		return
	}
	e := Round{Node: r.node.id, Locks: len(r.order), Renewed: renewed, NotHeld: notHeld, Failed: failed, Latency: r.latency}
	if failed > 0 {
		e.Err = r.err
	}
	for _, f := range s.hooks {
		f(e)
	}
}

// WithSendHook adds f, called on a node round's own goroutine just before
// the round's requests are sent, with the node and the keys it renews (in
// the order sent). f may block: the node's round stays in flight, so the
// node counts as busy, until it returns (tests use it to hold a node busy
// as a slow server would). f must not be nil.
func WithSendHook(f func(node string, keys []string)) Option {
	return func(s *Scheduler) error {
		if f == nil {
			return fmt.Errorf("%w: nil send hook", base.ErrInvalidArgument)
		}
		s.sendHooks = append(s.sendHooks, f)
		return nil
	}
}

// beforeSend calls the send hooks for r.
func (s *Scheduler) beforeSend(r *round) {
	if len(s.sendHooks) == 0 {
		return
	}
	keys := make([]string, len(r.leases))
	for i, l := range r.leases {
		keys[i] = l.key
	}
	for _, f := range s.sendHooks {
		f(r.node.id, keys)
	}
}
