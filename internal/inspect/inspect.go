// Package inspect reads the Redis state of one lock for the rlock command:
// who holds it and how often, its remaining TTL, its fencing token, the fair
// lock's queue of waiters with their deadlines, and how many clients are
// subscribed to its channels. It also reads a semaphore's or count-down
// latch's count (Report.Count), with an expirable semaphore's held permits.
//
// It reads any lock name, whatever kind of lock (reentrant or fair, from
// rlock or Redisson) it belongs to, using the key layout of package rlock.
// The data keys (lock hash, token counter, queue, deadlines) are read in one
// MULTI/EXEC transaction, so they form one consistent snapshot; they share
// the lock's hash slot, so this works on Redis Cluster too. Subscriber counts
// are read right after, with PUBSUB NUMSUB, summed over every node of a
// Cluster or Ring. Read never writes.
package inspect

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock/internal/base"
)

// ErrNotALock is returned by Read when the lock name, or one of the keys
// derived from it, holds a Redis value of the wrong type: it is not an rlock
// (or Redisson) lock.
var ErrNotALock = errors.New("not a lock")

// rwModeField is the hash field in which a Redisson read-write lock keeps
// its mode.
const rwModeField = "mode"

// Report is what Read found. Times and durations are measured against the
// now passed to Read.
type Report struct {
	// Name is the lock name, which is also the key of the lock hash.
	Name string
	// Time is the now passed to Read.
	Time time.Time
	// Locked reports whether the lock hash exists.
	Locked bool
	// Holders are the fields of the lock hash: one per owner holding the
	// lock (one, unless the lock is a read lock). Sorted by field.
	Holders []Holder
	// Mode is the "mode" field of a Redisson read-write lock ("read" or
	// "write"); empty for other locks. Such a lock's holders are its
	// readers or its writer (field "<clientID>:<ownerID>:write").
	Mode string
	// TTL is the lock's remaining lease when Locked and Expires.
	TTL time.Duration
	// Expires is false for a lock without expiry (PTTL -1).
	Expires bool
	// Token is the fencing token counter, the last token granted; HasToken
	// is false when the counter does not exist.
	Token    int64
	HasToken bool
	// Queue is the fair lock's queue of waiters, head first; empty for a
	// lock without one.
	Queue []Waiter
	// WaitingWriters are a read-write lock's writers that wait for its
	// readers and keep new rlock readers out meanwhile (rlock's
	// writer-wait set), first to run out first; overdue ones included.
	WaitingWriters []WaitingWriter
	// Channel is the lock's unlock channel and Subscribers the number of
	// subscriptions to it (clients of any kind waiting for a release).
	Channel     string
	Subscribers int64
	// Keys are the Redis keys Read looked at, for the operator's reference.
	Keys Keys
	// Count is set when name is not a lock but a count: a string key
	// holding an integer (a semaphore's available permits or a count-down
	// latch's count), or an expirable semaphore's timeout set without a
	// counter. The lock fields above are then zero, except Name, Time and
	// Keys. A count is never deleted by the rlock tool.
	Count *Count
}

// CountKind is what a count belongs to, as far as its surroundings tell.
type CountKind int

const (
	// CountUnknown: a semaphore's available permits or a count-down
	// latch's count; both are a bare integer under the name, and nothing
	// around it tells them apart.
	CountUnknown CountKind = iota
	// CountSemaphore: a counting semaphore (rlock's operation record
	// "{name}:rlock_ops" exists, or only the semaphore channel has
	// subscribers).
	CountSemaphore
	// CountExpirable: a semaphore whose permits have owners and leases
	// (its timeout set "{name}:timeout" exists).
	CountExpirable
	// CountLatch: a count-down latch (rlock's operation log
	// "rlock_latch_ops:{name}" exists, or only the latch channel has
	// subscribers).
	CountLatch
)

// String describes k for people.
func (k CountKind) String() string {
	switch k {
	case CountSemaphore:
		return "semaphore"
	case CountExpirable:
		return "expirable semaphore"
	case CountLatch:
		return "count-down latch"
	}
	return "semaphore or count-down latch"
}

// Count is a semaphore's or count-down latch's state.
type Count struct {
	// Value is the integer under the name: a semaphore's available
	// permits or a latch's count. Missing reports that the key does not
	// exist (an expirable semaphore with its timeout set only): Value is 0.
	Value   int64
	Missing bool
	Kind    CountKind
	// TTL is the key's remaining TTL when Expires (neither rlock nor
	// Redisson sets one on a semaphore; a latch's count has none either).
	TTL     time.Duration
	Expires bool
	// Permits are an expirable semaphore's held permits, first to expire
	// first.
	Permits []Permit
	// SemaphoreChannel and LatchChannel are the two channels the count
	// may be published on, and their subscribers (clients waiting).
	SemaphoreChannel, LatchChannel         string
	SemaphoreSubscribers, LatchSubscribers int64
	// Timeout, SemaphoreOps and LatchOps are the keys looked at.
	Timeout, SemaphoreOps, LatchOps string
}

// Permit is one held permit of an expirable semaphore.
type Permit struct {
	// ID is the permit ID as callers see it: 32 lowercase hex characters
	// (the set holds the raw 16 bytes). A member of another length is
	// shown hex-encoded as it is.
	ID string
	// Expiry is when the permit returns to the pool unless released or
	// renewed; NoLease reports Redisson's no-lease score instead (held
	// until released). A permit rlock took without a lease has an expiry
	// that its holder's watchdog keeps pushing back.
	Expiry  time.Time
	NoLease bool
}

// Overdue reports whether p's expiry has passed at now: the next script
// on the semaphore returns it to the pool.
func (p Permit) Overdue(now time.Time) bool { return !p.NoLease && !p.Expiry.After(now) }

// Keys are the Redis keys of a lock. WriterWait is a read-write lock's
// writer-wait set.
type Keys struct {
	Lock, Token, Queue, Timeout, WriterWait string
}

// Holder is one field of the lock hash.
type Holder struct {
	// Field is the hash field, "<clientID>:<ownerID>".
	Field string
	// ClientID and OwnerID are Field split at its first colon. A field
	// without a colon has it all in ClientID.
	ClientID, OwnerID string
	// Holds is the hold count.
	Holds int64
	// Writer reports a read-write lock's writer (field ending in ":write").
	Writer bool
	// Lease is a read-write lock reader's remaining lease: the longest
	// remaining TTL of its timeout keys (one per read hold); 0 when every
	// one ran out (the reader is gone and is pruned at the next writer's
	// attempt); negative when one has no expiry. Zero for other holders,
	// whose lease is the lock's TTL.
	Lease time.Duration
}

// WaitingWriter is one entry of a read-write lock's writer-wait set.
type WaitingWriter struct {
	// Field is the writer's field, "<clientID>:<ownerID>:write".
	Field string
	// Deadline is when it stops keeping readers out unless it renews its
	// entry (a live waiting writer does, every third of its writer wait).
	Deadline time.Time
}

// Overdue reports whether the writer's deadline has passed at now: it no
// longer keeps readers out.
func (w WaitingWriter) Overdue(now time.Time) bool { return !w.Deadline.After(now) }

// Waiter is one entry of a fair lock's queue.
type Waiter struct {
	// Field is the waiter's owner field, "<clientID>:<ownerID>".
	Field string
	// Deadline is the time by which the waiter must have taken the lock or
	// refreshed its place, or be pruned as dead. HasDeadline is false when
	// the waiter has no entry in the timeout set.
	Deadline    time.Time
	HasDeadline bool
	// Channel is the waiter's own wake-up channel and Subscribers the number
	// of subscriptions to it.
	Channel     string
	Subscribers int64
}

// Overdue reports whether the waiter's deadline has passed at now: the next
// acquire attempt on the lock will prune it.
func (w Waiter) Overdue(now time.Time) bool { return w.HasDeadline && !w.Deadline.After(now) }

// KeysOf returns the keys of lock name.
func KeysOf(name string) Keys {
	return Keys{
		Lock:    name,
		Token:   base.DerivedKey(base.TokenPrefix, name),
		Queue:   base.DerivedKey(base.QueuePrefix, name),
		Timeout: base.DerivedKey(base.TimeoutPrefix, name),

		WriterWait: base.WriterWait(name),
	}
}

// WaiterChannel returns the wake-up channel of the fair lock waiter whose
// owner field is field.
func WaiterChannel(name, field string) string { return base.Channel(name) + ":" + field }

// Read reads the state of lock name. It returns an error wrapping
// base.ErrInvalidArgument for a bad name, ErrNotALock when a key has the
// wrong type, base.ErrUnexpectedReply for values no lock writes, and the
// Redis error (or ctx's) otherwise. It runs two round trips, or one plus one
// per node for PUBSUB NUMSUB on a Cluster or Ring.
func Read(ctx context.Context, rdb redis.UniversalClient, name string, now time.Time) (*Report, error) {
	if err := base.ValidateName(name); err != nil {
		return nil, err
	}
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil Redis client", base.ErrInvalidArgument)
	}
	k := KeysOf(name)
	var (
		typ   *redis.StatusCmd
		str   *redis.StringCmd
		semTO *redis.ZSliceCmd
		semOp *redis.IntCmd
		latOp *redis.IntCmd
		hash  *redis.MapStringStringCmd
		pttl  *redis.DurationCmd
		token *redis.StringCmd
		queue *redis.StringSliceCmd
		dls   *redis.ZSliceCmd
		ww    *redis.ZSliceCmd
	)
	// The transaction's own error is that of the first failed command; each
	// command is checked below instead, so a wrong type is named precisely.
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		typ = p.Type(ctx, k.Lock)
		str = p.Get(ctx, k.Lock)
		semTO = p.ZRangeWithScores(ctx, base.SemaphoreTimeout(name), 0, -1)
		semOp = p.Exists(ctx, base.SemaphoreOps(name))
		latOp = p.Exists(ctx, base.LatchOps(name))
		hash = p.HGetAll(ctx, k.Lock)
		pttl = p.PTTL(ctx, k.Lock)
		token = p.Get(ctx, k.Token)
		queue = p.LRange(ctx, k.Queue, 0, -1)
		dls = p.ZRangeWithScores(ctx, k.Timeout, 0, -1)
		ww = p.ZRangeWithScores(ctx, k.WriterWait, 0, -1)
		return nil
	})
	if err != nil && typ == nil {
		return nil, err
	}
	if err := typ.Err(); err != nil {
		return nil, fmt.Errorf("reading %q: %w", name, err)
	}
	switch t := typ.Val(); t {
	case "none":
		if permits, ok := expirablePermits(semTO); ok && len(permits) > 0 {
			return readCount(ctx, rdb, name, now, k, nil, pttl, semTO, semOp, latOp)
		}
	case "hash":
	case "string":
		// A semaphore's or count-down latch's count (packages semaphore
		// and latch): never a lock, and never to be deleted as one.
		return readCount(ctx, rdb, name, now, k, str, pttl, semTO, semOp, latOp)
	default:
		return nil, fmt.Errorf("%w: key %q holds a %s, not a lock hash", ErrNotALock, name, t)
	}
	r := &Report{Name: name, Time: now, Channel: base.Channel(name), Keys: k}

	if err := wrongType(hash.Err(), k.Lock, "hash"); err != nil {
		return nil, err
	}
	if err := pttl.Err(); err != nil {
		return nil, fmt.Errorf("reading %q: %w", name, err)
	}
	if typ.Val() == "hash" {
		if err := CheckLock(name, hash.Val(), expires(pttl.Val())); err != nil {
			return nil, err
		}
	}
	for field, v := range hash.Val() {
		if field == rwModeField {
			r.Mode = v
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64) // checked by CheckLock
		h := Holder{Field: field, ClientID: field, Holds: n}
		if i := strings.IndexByte(field, ':'); i >= 0 {
			h.ClientID, h.OwnerID = field[:i], field[i+1:]
		}
		r.Holders = append(r.Holders, h)
	}
	sortHolders(r.Holders)
	r.Locked = typ.Val() == "hash"

	if r.Locked {
		// go-redis returns -1 and -2 unscaled; accept both spellings.
		switch d := pttl.Val(); {
		case d == -1 || d == -time.Millisecond:
			r.Expires = false
		case d < 0: // gone between TYPE and PTTL: impossible inside MULTI
			return nil, fmt.Errorf("%w: lock %q: PTTL %v", base.ErrUnexpectedReply, name, d)
		default:
			r.Expires, r.TTL = true, d
		}
	}

	switch v, err := token.Result(); {
	case errors.Is(err, redis.Nil):
	case err != nil:
		if werr := wrongType(err, k.Token, "string"); werr != nil {
			return nil, werr
		}
		return nil, fmt.Errorf("reading %q: %w", k.Token, err)
	default:
		n, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil {
			return nil, fmt.Errorf("%w: fencing token counter %q is %q", base.ErrUnexpectedReply, k.Token, v)
		}
		r.Token, r.HasToken = n, true
	}

	if err := wrongType(queue.Err(), k.Queue, "list"); err != nil {
		return nil, err
	}
	if err := wrongType(dls.Err(), k.Timeout, "sorted set"); err != nil {
		return nil, err
	}
	deadline := make(map[string]float64, len(dls.Val()))
	for _, z := range dls.Val() {
		if m, ok := z.Member.(string); ok {
			deadline[m] = z.Score
		}
	}
	for _, field := range queue.Val() {
		w := Waiter{Field: field, Channel: WaiterChannel(name, field)}
		if ms, ok := deadline[field]; ok {
			w.Deadline, w.HasDeadline = time.UnixMilli(int64(ms)), true
		}
		r.Queue = append(r.Queue, w)
	}

	if err := wrongType(ww.Err(), k.WriterWait, "sorted set"); err != nil {
		return nil, err
	}
	if r.Mode != "" {
		r.Channel = base.RWChannel(name)
		for _, z := range ww.Val() {
			if m, ok := z.Member.(string); ok {
				r.WaitingWriters = append(r.WaitingWriters, WaitingWriter{Field: m, Deadline: time.UnixMilli(int64(z.Score))})
			}
		}
		if err := readLeases(ctx, rdb, r); err != nil {
			return nil, err
		}
	}

	channels := []string{r.Channel}
	for _, w := range r.Queue {
		channels = append(channels, w.Channel)
	}
	subs, err := numSub(ctx, rdb, channels)
	if err != nil {
		return nil, fmt.Errorf("counting subscribers of %q: %w", name, err)
	}
	r.Subscribers = subs[r.Channel]
	for i := range r.Queue {
		r.Queue[i].Subscribers = subs[r.Queue[i].Channel]
	}
	return r, nil
}

// expirablePermits returns the permits of an expirable semaphore's
// timeout set, and false when the key is not a sorted set.
func expirablePermits(semTO *redis.ZSliceCmd) ([]Permit, bool) {
	if err := semTO.Err(); err != nil {
		return nil, false
	}
	var ps []Permit
	for _, z := range semTO.Val() {
		m, _ := z.Member.(string)
		p := Permit{ID: hex.EncodeToString([]byte(m))}
		if z.Score >= base.SemaphoreNoLeaseScore {
			p.NoLease = true
		} else {
			p.Expiry = time.UnixMilli(int64(z.Score))
		}
		ps = append(ps, p)
	}
	return ps, true
}

// readCount builds the report of a count: the integer under name (str;
// nil when the key is missing), an expirable semaphore's permits, and the
// subscribers of both channels a count may be published on.
func readCount(ctx context.Context, rdb redis.UniversalClient, name string, now time.Time, k Keys,
	str *redis.StringCmd, pttl *redis.DurationCmd, semTO *redis.ZSliceCmd, semOp, latOp *redis.IntCmd) (*Report, error) {
	c := &Count{
		Missing:          str == nil,
		SemaphoreChannel: base.SemaphoreChannel(name),
		LatchChannel:     base.LatchChannel(name),
		Timeout:          base.SemaphoreTimeout(name),
		SemaphoreOps:     base.SemaphoreOps(name),
		LatchOps:         base.LatchOps(name),
	}
	if str != nil {
		v, err := str.Result()
		if err != nil {
			return nil, fmt.Errorf("reading %q: %w", name, err)
		}
		n, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil {
			return nil, fmt.Errorf("%w: key %q holds the string %q, neither a lock nor a semaphore's or count-down latch's count",
				ErrNotALock, name, truncate(v, 40))
		}
		c.Value = n
		if d := pttl.Val(); d >= 0 && d != -time.Millisecond {
			c.Expires, c.TTL = true, d
		}
	}
	permits, isSet := expirablePermits(semTO)
	c.Permits = permits
	switch {
	case isSet && semTO.Err() == nil && (len(permits) > 0 || c.Missing):
		c.Kind = CountExpirable
	case semOp.Val() > 0 && latOp.Val() == 0:
		c.Kind = CountSemaphore
	case latOp.Val() > 0 && semOp.Val() == 0:
		c.Kind = CountLatch
	}
	subs, err := numSub(ctx, rdb, []string{c.SemaphoreChannel, c.LatchChannel})
	if err != nil {
		return nil, fmt.Errorf("counting subscribers of %q: %w", name, err)
	}
	c.SemaphoreSubscribers, c.LatchSubscribers = subs[c.SemaphoreChannel], subs[c.LatchChannel]
	if c.Kind == CountUnknown {
		switch {
		case c.SemaphoreSubscribers > 0 && c.LatchSubscribers == 0:
			c.Kind = CountSemaphore
		case c.LatchSubscribers > 0 && c.SemaphoreSubscribers == 0:
			c.Kind = CountLatch
		}
	}
	return &Report{Name: name, Time: now, Keys: k, Count: c}, nil
}

// truncate shortens s to at most n bytes for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// readLeases fills in the remaining lease of each reader of read-write
// lock r from its timeout keys (one round trip, after the snapshot: a
// reader may have come or gone in between).
func readLeases(ctx context.Context, rdb redis.UniversalClient, r *Report) error {
	cmds := make([][]*redis.DurationCmd, len(r.Holders))
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, h := range r.Holders {
			if strings.HasSuffix(h.Field, base.WriterFieldSuffix) {
				continue
			}
			for n := int64(1); n <= min(h.Holds, 1000); n++ {
				cmds[i] = append(cmds[i], p.PTTL(ctx, base.RWTimeoutKey(r.Name, h.Field, n)))
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading the read holds of %q: %w", r.Name, err)
	}
	for i := range r.Holders {
		h := &r.Holders[i]
		h.Writer = strings.HasSuffix(h.Field, base.WriterFieldSuffix)
		for _, c := range cmds[i] {
			switch d := c.Val(); {
			case d == -1 || d == -time.Millisecond: // no expiry
				h.Lease = -time.Millisecond
			case d > h.Lease && h.Lease >= 0:
				h.Lease = d
			}
		}
	}
	return nil
}

// expires reports whether PTTL's reply d is a TTL (go-redis returns -1
// and -2 unscaled: both spellings count as none).
func expires(d time.Duration) bool { return d >= 0 }

// CheckLock is the one test of whether the hash at key name is a lock,
// shared by Read and so by every command of the rlock tool: it returns
// nil for a lock's shape and an error wrapping ErrNotALock that says why
// otherwise. A lock hash, rlock's or Redisson's, has a TTL (every lock
// has one: a lease or the watchdog's); its fields are owner fields
// "<clientID>:<ownerID>" (a client ID of 1-128 bytes without ':', as rlock
// and Redisson's "<UUID>:<threadId>" write them; an owner ID of 1-256
// bytes) whose values are hold counts, positive integers; a read-write
// lock has besides its "mode" field, "read" or "write", and in write mode
// writer fields "<clientID>:<ownerID>:write". There is at least one
// holder. Anything else (application data) is not a lock, and the tool
// never deletes it.
func CheckLock(name string, fields map[string]string, hasTTL bool) error {
	notLock := func(format string, a ...any) error {
		return fmt.Errorf("%w: key %q %s", ErrNotALock, name, fmt.Sprintf(format, a...))
	}
	if !hasTTL {
		return notLock("is a hash with no TTL (every rlock and Redisson lock has one)")
	}
	mode, rw := fields[rwModeField]
	if rw && mode != "read" && mode != "write" {
		return notLock("has mode %q (a read-write lock's is \"read\" or \"write\")", mode)
	}
	holders := 0
	for _, field := range slices.Sorted(maps.Keys(fields)) { // the same answer every time
		v := fields[field]
		if field == rwModeField {
			continue
		}
		holders++
		owner := field
		switch writer := strings.HasSuffix(field, base.WriterFieldSuffix); {
		case rw && writer && mode == "read":
			return notLock("has writer field %q in read mode", field)
		case rw && writer:
			owner = strings.TrimSuffix(field, base.WriterFieldSuffix)
		}
		if !isOwnerField(owner) {
			return notLock("has field %q, not an owner field <clientID>:<ownerID>", field)
		}
		if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < 1 {
			return notLock("has field %q = %q, not a hold count", field, v)
		}
	}
	if holders == 0 {
		return notLock("has no holder field")
	}
	return nil
}

// isOwnerField reports whether field has the shape of an owner field,
// "<clientID>:<ownerID>", as rlock (rlock.WithClientID, rlock.WithOwner,
// a handle's "#<n>") and Redisson ("<UUID>:<threadId>") write them.
func isOwnerField(field string) bool {
	client, owner, ok := strings.Cut(field, ":")
	switch {
	case !ok || client == "" || len(client) > 128 || owner == "" || len(owner) > base.MaxOwnerLen:
		return false
	case strings.ContainsAny(field, "\x00\r\n"):
		return false
	}
	return true
}

// wrongType turns a Redis WRONGTYPE error on key into ErrNotALock and
// passes other errors through.
func wrongType(err error, key, want string) error {
	switch {
	case err == nil || errors.Is(err, redis.Nil):
		return nil
	case strings.HasPrefix(err.Error(), "WRONGTYPE"):
		return fmt.Errorf("%w: key %q is not a %s", ErrNotALock, key, want)
	default:
		return fmt.Errorf("reading %q: %w", key, err)
	}
}

func sortHolders(hs []Holder) {
	slices.SortFunc(hs, func(a, b Holder) int { return strings.Compare(a.Field, b.Field) })
}

// sharded is a client whose subscribers are spread over several servers
// (*redis.ClusterClient, *redis.Ring).
type sharded interface {
	ForEachShard(ctx context.Context, fn func(ctx context.Context, c *redis.Client) error) error
}

// numSub returns PUBSUB NUMSUB of channels. PUBSUB NUMSUB counts only the
// subscriptions on the server it is sent to, so on a Cluster or Ring it is
// sent to every node and the counts summed.
func numSub(ctx context.Context, rdb redis.UniversalClient, channels []string) (map[string]int64, error) {
	sh, ok := rdb.(sharded)
	if !ok {
		return rdb.PubSubNumSub(ctx, channels...).Result()
	}
	counts := make([]atomic.Int64, len(channels))
	err := sh.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error {
		m, err := c.PubSubNumSub(ctx, channels...).Result()
		if err != nil {
			return err
		}
		for i, ch := range channels {
			counts[i].Add(m[ch])
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(channels))
	for i, ch := range channels {
		out[ch] = counts[i].Load()
	}
	return out, nil
}
