package core

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/lua"
)

// kind is everything that sets one lock kind apart: its keys, its scripts
// and how its blocked calls wait. The engine's flow (attempt, wait,
// release, settle, renew) is the same for every kind and asks the kind
// only through these methods; see the package doc for how a new kind
// plugs in. Every script a kind returns answers in the engine's reply
// shapes (parseAcquireReply, parseReleaseReply, parseRenewReply).
type kind interface {
	// acquire is the acquire script call for the owner field, which holds
	// count holds as far as it knows; q asks a kind with a queue to queue
	// the owner (or renew its place); reg, for a waiting call of a kind
	// whose releases designate a client (waitPlan.registers), is how the
	// attempt registers its client.
	acquire(field string, count int64, lease time.Duration, q queueing, pub string, reg registration) scriptCall
	// release is the call that releases one of the count holds of field,
	// leaving lease as the TTL when holds remain; a last release records
	// itself in lt for replay. pub, in every call that may wake waiters,
	// says how to publish (see Client.publishArg and publish.lua).
	release(field string, count int64, lease time.Duration, lt latch, pub string) scriptCall
	// forceUnlock is the call that deletes the lock whoever holds it;
	// the engine appends the expected holders, if any.
	forceUnlock(latch string, replay time.Duration, pub string) scriptCall
	// renew is the call that sets the TTL of field's holds to ttl if it
	// still holds the lock.
	renew(field string, ttl time.Duration) scriptCall
	// waitPlan says how a blocked Lock call of the owner field waits.
	waitPlan(field string) waitPlan
	// leave is the call that takes field out of the line when its last
	// waiting Lock call returns without the lock; false for a kind whose
	// waiters leave no trace on the server.
	leave(field, pub string) (scriptCall, bool)
	// field is the hash field in which owner's holds of this kind count:
	// the owner itself, or a read-write lock writer's "<owner>:write", so
	// that an owner's read and write holds have separate ownerStates.
	field(owner string) string
}

// registration is what a waiting call's attempt tells a reentrant lock's
// acquire script about its client (see scripts/designate.lua): the
// client's tag ("" for an attempt that registers nothing), whether the
// client has other calls waiting for the lock, whether it certainly has
// no registration to take out on a grant, and its longest poll.
//
// A client without the lock's channel (neither waiters on it nor the
// channel lingering) is unregistered: dropping the channel took its
// registration out (waiters.Hub.SetDesignation). A registration may still
// stand meanwhile, one that a refused attempt of a call about to join
// made (the call waits, so it is right), or one whose removal failed (it
// lapses by itself); a grant then leaves it alone either way.
type registration struct {
	tag          string
	others       bool
	unregistered bool
	poll         time.Duration
	// behind: the call's first attempt, with other writers of the client
	// waiting already (preferred waiters); a read-write lock's writer then
	// does not take a free lock, which its client's designation gives to
	// the longest waiting of them (as the reentrant lock's JoinBehind).
	behind bool
}

// queueing is what an attempt asks of a kind with a queue (the fair
// lock's, the read-write lock's writer-wait set) when it is not granted.
type queueing uint8

const (
	noQueue    queueing = iota // a one-shot attempt: never queue
	joinQueue                  // queue the owner: a waiting call's first attempt, most likely not queued yet
	renewPlace                 // queue the owner: a later attempt, whose owner most likely has a place to renew
)

// arg is fair_lock.lua's ARGV[6]: "0", "1" (join) or "2" (renew). Either
// of the last two takes a place or renews the one there is; the hint
// spares the script the reads of the other case.
func (q queueing) arg() string {
	return [...]string{noQueue: "0", joinQueue: "1", renewPlace: "2"}[q]
}

// othersArg is lock.lua's ARGV[6]: "1" with other calls of the client
// waiting, "-" with none and no registration to take out, "0" otherwise.
func (r registration) othersArg() string {
	switch {
	case r.others:
		return "1"
	case r.unregistered:
		return "-"
	}
	return "0"
}

// designations is how many registered clients a reentrant lock's last
// release designates to wake a waiter: two, so that one crashed client
// does not leave the release waking nobody (see scripts/designate.lua).
const designations = 2

// scriptCall is one script with its KEYS and ARGV.
type scriptCall struct {
	script *redis.Script
	keys   []string
	args   []any
}

// latch is where a last release records that it ran, so that its re-send
// answers from the record (see ran_by in scripts/holds.lua): the
// lock's latch key, the request's ID and how long the record lives (the
// client's replay window).
type latch struct {
	key, request string
	ttl          time.Duration
}

// waitPlan is how a blocked Lock call of one kind waits between attempts.
type waitPlan struct {
	channel string        // where its wake-ups are published
	queue   bool          // its attempts queue the owner, then renew its place
	poll    time.Duration // longest wait between attempts; noBound: the lock's TTL decides
	behind  bool          // a call that does not re-enter waits behind the client's calls already waiting before it tries
	prefer  bool          // an unlock message ("0") wakes it before the channel's other waiters
	early   bool          // join before the first attempt, so that no release between the two goes only to other waiters
	// registers: its attempts register the client with the lock, whose
	// releases then designate the clients that wake a waiter.
	registers bool
	// behindFirst: the first attempt of a call whose client has other
	// writers waiting does not take a free lock (registration.behind).
	behindFirst bool
}

// noBound is a waitPlan's poll when only the lock's TTL (or the client's
// max-poll for a lock without expiry) bounds the wait.
const noBound time.Duration = 1<<63 - 1

// newKind returns the kind of a lock called name configured by cfg.
func newKind(name string, cfg LockConfig) kind {
	h := hashLock{name: name, token: base.DerivedKey(base.TokenPrefix, name), fencing: boolArg(cfg.Fencing)}
	h.lockKeys = []string{h.name, h.token}
	switch cfg.Kind {
	case Fair:
		return &fairKind{hashLock: h, channel: base.Channel(name), queueTimeout: cfg.QueueTimeout, threadWait: cmp.Or(cfg.ThreadWait, DefaultThreadWait),
			queue: base.DerivedKey(base.QueuePrefix, name), timeouts: base.DerivedKey(base.TimeoutPrefix, name),
			alive: base.DerivedKey(base.TimeoutPrefix, name) + ":rlock"}
	case Read:
		return &readKind{rwLock: newRWLock(h)}
	case Write:
		return &writeKind{rwLock: newRWLock(h), writerWait: cfg.WriterWait, writerWaitArg: cfg.WriterWait.Milliseconds()}
	}
	k := &reentrantKind{hashLock: h, channel: base.Channel(name), registry: base.Waiters(name)}
	k.latch = base.DerivedKey(base.LatchPrefix, name)
	k.releaseKeys = []string{k.name, k.channel, k.latch, k.registry}
	return k
}

// hashLock is what the kinds share: the lock hash called name, in which
// each owner field counts its holds, and the fencing token counter.
type hashLock struct {
	name    string
	token   string // the fencing token counter's key
	fencing any    // boolArg: draw a token on a grant from free (a string, boxed once)
	// lockKeys is the KEYS of a reentrant acquire that registers
	// nothing, built once.
	lockKeys []string
}

// msArg boxes a duration's milliseconds as a script argument, keeping the
// last one boxed: a handle sends the same lease (and latch lifetime) over
// and over, and boxing an int64 of 256 or more allocates. Safe for
// concurrent use.
type msArg struct{ last atomic.Pointer[boxedMs] }

type boxedMs struct {
	ms  int64
	arg any
}

func (a *msArg) of(d time.Duration) any {
	ms := d.Milliseconds()
	if b := a.last.Load(); b != nil && b.ms == ms {
		return b.arg
	}
	b := &boxedMs{ms: ms, arg: ms}
	a.last.Store(b)
	return b.arg
}

// stringArg is msArg for a string: a handle's calls are nearly all its own
// owner's, whose field it boxes once.
type stringArg struct{ last atomic.Pointer[boxedString] }

type boxedString struct {
	s   string
	arg any
}

func (a *stringArg) of(s string) any {
	if b := a.last.Load(); b != nil && b.s == s {
		return b.arg
	}
	b := &boxedString{s: s, arg: s}
	a.last.Store(b)
	return b.arg
}

// The publish modes (see Client.publishArg), boxed once.
var (
	pubC  any = "c"
	pubS  any = "s"
	pubCS any = "cs"
)

// pubArg returns the publish mode pub as a script argument, boxed without
// allocating for the modes there are.
func pubArg(pub string) any {
	switch pub {
	case "c":
		return pubC
	case "s":
		return pubS
	case "cs":
		return pubCS
	}
	return pub
}

func (k *hashLock) renew(field string, ttl time.Duration) scriptCall {
	return scriptCall{lua.Renew, []string{k.name}, []any{ttl.Milliseconds(), field}}
}

// field: the reentrant and fair kinds count an owner's holds under the
// owner itself.
func (k *hashLock) field(owner string) string { return owner }

// reentrantKind is Redisson's RLock: one channel per lock, on which every
// release publishes, and waiters that leave no trace on the server.
//
// rlock's own clients register in the lock's registry while they have
// waiting calls, and a last release designates up to two of them to wake
// a waiter (scripts/designate.lua), so that a release costs one or two
// attempts however many clients wait.
type reentrantKind struct {
	hashLock
	channel  string
	registry string // the clients with waiting calls (base.Waiters)
	latch    string // the lock's latch key (see Lock.latchOf)
	// releaseKeys is a release's KEYS with the lock's latch, built once.
	releaseKeys []string
	// The last lease, latch lifetime and owner field sent, boxed: what
	// the uncontended calls of a handle send again and again, so that a
	// call allocates none of it.
	leaseArg, ttlArg msArg
	fieldArg         stringArg
}

// acquire: the registry is among the keys only when the call registers
// (a multi-key call during a slot migration fails with TRYAGAIN unless
// every key is where the call is sent).
func (k *reentrantKind) acquire(field string, count int64, lease time.Duration, _ queueing, _ string, reg registration) scriptCall {
	if reg.tag == "" {
		return scriptCall{lua.Lock, k.lockKeys, []any{k.leaseArg.of(lease), k.fieldArg.of(field), count, k.fencing}}
	}
	return scriptCall{lua.Lock, []string{k.name, k.token, k.registry},
		[]any{k.leaseArg.of(lease), k.fieldArg.of(field), count, k.fencing, reg.tag, reg.othersArg(), reg.poll.Milliseconds()}}
}

func (k *reentrantKind) release(field string, count int64, lease time.Duration, lt latch, pub string) scriptCall {
	keys := k.releaseKeys
	if lt.key != k.latch {
		keys = []string{k.name, k.channel, lt.key, k.registry}
	}
	return scriptCall{lua.Unlock, keys,
		[]any{k.leaseArg.of(lease), k.fieldArg.of(field), count, base.UnlockMessage, k.ttlArg.of(lt.ttl), pubArg(pub), lt.request, designations}}
}

func (k *reentrantKind) forceUnlock(latch string, replay time.Duration, pub string) scriptCall {
	return scriptCall{lua.ForceUnlock, []string{k.name, k.channel, latch}, []any{base.UnlockMessage, replay.Milliseconds(), pub}}
}

// waitPlan: a new call queues behind the client's calls already waiting
// (unless its owner re-enters), which saves an attempt per grant under
// contention and hands grants round the client's waiters in arrival order.
func (k *reentrantKind) waitPlan(string) waitPlan {
	return waitPlan{channel: k.channel, poll: noBound, behind: true, registers: true}
}

func (k *reentrantKind) leave(_, _ string) (scriptCall, bool) { return scriptCall{}, false }

// fairKind is Redisson's RFairLock: granted in queue order; each waiter
// listens on its own channel, "<channel>:<owner field>", on which only a
// release that finds it first in line publishes, and keeps its place by
// renewing it within the queue timeout.
type fairKind struct {
	hashLock
	queue, timeouts string // the queue of owners and their scores
	alive           string // rlock waiters' liveness hash (see fair_common.lua): the last key of every fair script
	channel         string // the prefix of the waiters' channels
	queueTimeout    time.Duration
	threadWait      time.Duration // Redisson's fairLockWaitTimeout: see fair_common.lua
}

func (k *fairKind) lineKeys() []string { return []string{k.name, k.queue, k.timeouts, k.alive} }

// keysWith returns the lock's keys with key between the scores and the
// liveness hash, as the acquire and release scripts take them.
func (k *fairKind) keysWith(key string) []string {
	return []string{k.name, k.queue, k.timeouts, key, k.alive}
}

func (k *fairKind) acquire(field string, count int64, lease time.Duration, q queueing, pub string, _ registration) scriptCall {
	return scriptCall{lua.FairLock, k.keysWith(k.token),
		[]any{lease.Milliseconds(), field, count, k.fencing, k.queueTimeout.Milliseconds(), q.arg(), k.channel, base.UnlockMessage, pub, k.threadWait.Milliseconds(),
			time.Now().UnixMilli()}}
}

func (k *fairKind) release(field string, count int64, lease time.Duration, lt latch, pub string) scriptCall {
	return scriptCall{lua.FairUnlock, k.keysWith(lt.key),
		[]any{lease.Milliseconds(), field, count, base.UnlockMessage, lt.ttl.Milliseconds(), k.channel, pub, lt.request,
			time.Now().Add(k.queueTimeout / 3).UnixMilli()}}
}

func (k *fairKind) forceUnlock(latch string, replay time.Duration, pub string) scriptCall {
	return scriptCall{lua.FairForceUnlock, k.keysWith(latch),
		[]any{base.UnlockMessage, replay.Milliseconds(), k.channel, pub}}
}

// waitPlan: every attempt of a waiting call queues the owner or renews its
// place, at least every third of the queue timeout.
func (k *fairKind) waitPlan(field string) waitPlan {
	return waitPlan{channel: k.channel + ":" + field, queue: true, poll: k.queueTimeout / 3}
}

func (k *fairKind) leave(field, pub string) (scriptCall, bool) {
	return scriptCall{lua.FairLeave, k.lineKeys(), []any{field, base.UnlockMessage, k.channel, pub, k.threadWait.Milliseconds()}}, true
}

// rwLock is what the two sides of a read-write lock (Redisson's
// RReadWriteLock) share: the hash with its "mode" field, in which readers
// count under "<owner>" and the writer under "<owner>:write"; one timeout
// key per read hold; the writer-wait set; one channel for both sides.
// Renewal is hashLock's: renew.lua tells a read-write hash by its mode.
type rwLock struct {
	hashLock
	channel string                    // redisson_rwlock:{name}
	wait    string                    // the writer-wait set
	writers string                    // the registry of clients with waiting writers (base.RWWaiters)
	readers string                    // the registry of clients with waiting readers (base.RWReaders)
	until   atomic.Pointer[[2]string] // the last writer field and its until key (see untilKey)
}

func newRWLock(h hashLock) *rwLock {
	return &rwLock{hashLock: h, channel: base.RWChannel(h.name), wait: base.WriterWait(h.name),
		writers: base.RWWaiters(h.name), readers: base.RWReaders(h.name)}
}

// untilKey returns base.RWUntilKey of writer field wfield, remembering the
// last one: a handle's calls are nearly all its own owner's.
func (k *rwLock) untilKey(wfield string) string {
	if p := k.until.Load(); p != nil && p[0] == wfield {
		return p[1]
	}
	key := base.RWUntilKey(k.name, wfield)
	k.until.Store(&[2]string{wfield, key})
	return key
}

func (k *rwLock) latchKeys(latch string) []string { return []string{k.name, k.channel, latch} }

// readKind is the read side: shared by any number of owners, kept out by a
// writer holding the lock and by writers waiting for readers to leave.
type readKind struct{ *rwLock }

func (k *readKind) acquire(field string, count int64, lease time.Duration, _ queueing, _ string, reg registration) scriptCall {
	if reg.tag == "" {
		return scriptCall{lua.RWReadLock, []string{k.name, k.wait}, []any{lease.Milliseconds(), field, count, base.WriterField(field)}}
	}
	return scriptCall{lua.RWReadLock, []string{k.name, k.wait, k.readers},
		[]any{lease.Milliseconds(), field, count, base.WriterField(field), reg.tag, reg.othersArg(), reg.poll.Milliseconds()}}
}

// release: only the release that leaves no holder at all publishes, the
// unlock message "0", meant for a writer.
func (k *readKind) release(field string, count int64, lease time.Duration, lt latch, pub string) scriptCall {
	return scriptCall{lua.RWUnlockRead, k.latchKeys(lt.key),
		[]any{lease.Milliseconds(), field, count, base.UnlockMessage, lt.ttl.Milliseconds(), pub, lt.request}}
}

func (k *readKind) forceUnlock(latch string, replay time.Duration, pub string) scriptCall {
	return scriptCall{lua.RWForceUnlock, k.latchKeys(latch), []any{base.ReadUnlockMessage, replay.Milliseconds(), "read", pub}}
}

// waitPlan: readers may be granted all at once, so none waits behind
// another; the reply's wait (a writer's lease, or the first waiting
// writer's deadline) bounds the sleep. Its attempts register the client
// as having readers waiting, so that a write release wakes every waiter
// (see rw_unlock_write.lua).
func (k *readKind) waitPlan(string) waitPlan {
	return waitPlan{channel: k.channel, poll: noBound, early: true, registers: true}
}

func (k *readKind) leave(_, _ string) (scriptCall, bool) { return scriptCall{}, false }

// holds is the call that reads field's live hold count: a reader whose
// timeout keys all ran out, or a writer whose lease ran out beside its
// owner's reads, holds nothing, whatever its field says.
func (k *rwLock) holds(field string) scriptCall {
	return scriptCall{lua.RWHolds, []string{k.name}, []any{field}}
}

func (k *readKind) lockedIn(s RWState) bool { return len(s.Readers) > 0 }

// writeKind is the write side: exclusive; a blocking writer that finds
// readers registers in the writer-wait set, which keeps new readers out
// until it had its turn, and renews its entry at least every third of the
// writer-wait timeout.
type writeKind struct {
	*rwLock
	writerWait    time.Duration
	writerWaitArg any // writerWait in ms (an int64), boxed once
}

func (k *writeKind) field(owner string) string { return base.WriterField(owner) }

func (k *writeKind) acquire(field string, count int64, lease time.Duration, q queueing, _ string, reg registration) scriptCall {
	queue := q != noQueue
	reader := strings.TrimSuffix(field, base.WriterFieldSuffix)
	if reg.tag == "" {
		return scriptCall{lua.RWWriteLock, []string{k.name, k.token, k.wait, k.untilKey(field)},
			[]any{lease.Milliseconds(), field, count, k.fencing, reader, k.writerWaitArg, boolArg(queue)}}
	}
	return scriptCall{lua.RWWriteLock, []string{k.name, k.token, k.wait, k.untilKey(field), k.writers},
		[]any{lease.Milliseconds(), field, count, k.fencing, reader, k.writerWaitArg, boolArg(queue),
			reg.tag, reg.othersArg(), reg.poll.Milliseconds(), boolArg(reg.behind)}}
}

// release: the last write release publishes "1", which wakes every
// waiter (readers may all enter, and a writer may take a free lock);
// when it frees the lock and no rlock reader waits, it designates up to
// two clients with waiting writers first, so that one writer tries (see
// rw_unlock_write.lua).
func (k *writeKind) release(field string, count int64, lease time.Duration, lt latch, pub string) scriptCall {
	return scriptCall{lua.RWUnlockWrite, []string{k.name, k.channel, lt.key, k.untilKey(field), k.writers, k.readers},
		[]any{lease.Milliseconds(), field, count, base.ReadUnlockMessage, lt.ttl.Milliseconds(), pub, lt.request, designations}}
}

func (k *writeKind) forceUnlock(latch string, replay time.Duration, pub string) scriptCall {
	return scriptCall{lua.RWForceUnlock, k.latchKeys(latch), []any{base.ReadUnlockMessage, replay.Milliseconds(), "write", pub}}
}

// waitPlan: a blocking writer's attempts register it as a waiting writer
// (when readers are in the way) and renew its entry, at least every third
// of the writer-wait timeout, whatever the reply's wait says. The last
// reader's release ("0") wakes a writer before the client's waiting
// readers, which could not use it. Its attempts register the client as
// having writers waiting, so that a write release designates one client
// to wake a writer (see rw_unlock_write.lua); a call whose client has
// writers waiting already does not take the lock on its first attempt
// (registration.behind).
func (k *writeKind) waitPlan(string) waitPlan {
	return waitPlan{channel: k.channel, queue: true, poll: k.writerWait / 3, prefer: true, early: true, registers: true, behindFirst: true}
}

// leave takes a writer that gives up out of the writer-wait set, waking
// the readers it kept out when it was the last.
func (k *writeKind) leave(field, pub string) (scriptCall, bool) {
	return scriptCall{lua.RWLeave, []string{k.name, k.wait, k.channel}, []any{field, base.ReadUnlockMessage, pub}}, true
}

func (k *writeKind) lockedIn(s RWState) bool { return s.Writer != nil }

// counted is a kind whose hold count is not simply its hash field's value.
type counted interface{ holds(field string) scriptCall }

// rwSide is a side of a read-write lock, which is locked when it has a
// live holder of its own (see RWState).
type rwSide interface{ lockedIn(s RWState) bool }

// line is the call that reads the queue (see Lock.Queue).
func (k *fairKind) line() scriptCall { return scriptCall{lua.FairQueue, k.lineKeys(), nil} }

// lined is a kind whose waiters stand in a line that can be read.
type lined interface{ line() scriptCall }

// runCall runs a script call (see Client.run), with more ARGV after its own.
func (c *Client) runCall(ctx context.Context, sc scriptCall, more ...any) *redis.Cmd {
	args := sc.args
	if len(more) > 0 {
		args = slices.Concat(args, more)
	}
	return c.run(ctx, sc.script, sc.keys, args...)
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
