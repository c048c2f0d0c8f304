package core

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/lua"
)

// RWState is one consistent view of a read-write lock (see rw_state.lua).
type RWState struct {
	Now     time.Time     // the server's time
	Mode    string        // "read", "write", or "" (free, or not a read-write lock)
	TTL     time.Duration // the hash's remaining TTL; negative: none (-1 ms no expiry, -2 ms no hash)
	Readers []RWHolder    // live readers (every one of whose holds has not run out)
	Writer  *RWHolder     // the writer, nil if none
	Waiting []QueuedWaiter
}

// RWHolder is one holder of a read-write lock.
type RWHolder struct {
	Field string        // "<clientID>:<ownerID>", a writer's with ":write"
	Holds int64         // its hold count
	TTL   time.Duration // its remaining lease; negative: no expiry
}

// RWState reads the state of the read-write lock called name in one
// script call; it changes nothing.
func (c *Client) RWState(ctx context.Context, name string) (RWState, error) {
	if err := base.CheckContext(ctx); err != nil {
		return RWState{}, err
	}
	if err := base.ValidateName(name); err != nil {
		return RWState{}, err
	}
	res, err := c.run(ctx, lua.RWState, []string{name, base.WriterWait(name)}).Slice()
	if err != nil {
		return RWState{}, fmt.Errorf("rlock: querying %q: %w", name, err)
	}
	s, ok := parseRWState(res)
	if !ok {
		return RWState{}, fmt.Errorf("%w: state script replied %v", base.ErrUnexpectedReply, res)
	}
	return s, nil
}

// parseRWState recognises rw_state.lua's reply.
func parseRWState(res []any) (RWState, bool) {
	r := reply{res: res, ok: true}
	s := RWState{Now: time.UnixMilli(r.int()), Mode: r.str(), TTL: time.Duration(r.int()) * time.Millisecond}
	for n := r.int(); n > 0 && r.ok; n-- {
		h := RWHolder{Field: r.str(), Holds: r.int(), TTL: time.Duration(r.int()) * time.Millisecond}
		if strings.HasSuffix(h.Field, base.WriterFieldSuffix) {
			s.Writer = &h
		} else {
			s.Readers = append(s.Readers, h)
		}
	}
	for m := r.int(); m > 0 && r.ok; m-- {
		s.Waiting = append(s.Waiting, QueuedWaiter{Owner: r.str(), Deadline: time.UnixMilli(r.int())})
	}
	slices.SortFunc(s.Readers, func(a, b RWHolder) int { return strings.Compare(a.Field, b.Field) })
	return s, r.ok && r.i == len(res)
}

// reply reads a flat script reply in order; ok turns false at the first
// element of the wrong type or past the end.
type reply struct {
	res []any
	i   int
	ok  bool
}

func (r *reply) next() any {
	if r.i >= len(r.res) {
		r.ok = false
		return nil
	}
	r.i++
	return r.res[r.i-1]
}

func (r *reply) int() int64 {
	v, ok := r.next().(int64)
	r.ok = r.ok && ok
	return v
}

func (r *reply) str() string {
	v, ok := r.next().(string)
	r.ok = r.ok && ok
	return v
}

// ForceUnlockRW deletes the read-write lock called name in whatever mode,
// whoever holds it, and wakes every waiter; with holders, only if exactly
// those fields hold it (see Lock.ForceUnlockHeldBy). It reports 1 when it
// deleted the lock, 0 when the lock was free, -1 when others hold it. A
// re-sent call answers from the record its first run left.
func (c *Client) ForceUnlockRW(ctx context.Context, name string, holders ...string) (int64, error) {
	if err := base.CheckContext(ctx); err != nil {
		return 0, err
	}
	if err := base.ValidateName(name); err != nil {
		return 0, err
	}
	latch := base.DerivedKey(base.LatchPrefix, name) + ":" + c.requestID()
	args := []any{base.ReadUnlockMessage, c.replay.Milliseconds(), ""}
	if holders != nil {
		sorted := slices.Clone(holders)
		slices.Sort(sorted)
		args = append(args, strings.Join(sorted, "\n"))
	}
	keys := []string{name, base.RWChannel(name), latch}
	n, err := c.run(detached(ctx), lua.RWForceUnlock, keys, args...).Int64()
	if err != nil {
		return 0, fmt.Errorf("rlock: force-unlocking %q: %w", name, err)
	}
	return n, nil
}
