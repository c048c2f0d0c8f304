package core

import (
	"context"
	"slices"
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
	// count holds as far as it knows; queue asks a kind with a queue to
	// queue the owner (or renew its place).
	acquire(field string, count int64, lease time.Duration, queue bool) scriptCall
	// release is the call that releases one of the count holds of field,
	// leaving lease as the TTL when holds remain; a last release records
	// itself in lt for replay.
	release(field string, count int64, lease time.Duration, lt latch) scriptCall
	// forceUnlock is the call that deletes the lock whoever holds it;
	// the engine appends the expected holders, if any.
	forceUnlock(latch string, replay time.Duration) scriptCall
	// renew is the call that sets the TTL of field's holds to ttl if it
	// still holds the lock.
	renew(field string, ttl time.Duration) scriptCall
	// waitPlan says how a blocked Lock call of the owner field waits.
	waitPlan(field string) waitPlan
	// leave is the call that takes field out of the line when its last
	// waiting Lock call returns without the lock; false for a kind whose
	// waiters leave no trace on the server.
	leave(field string) (scriptCall, bool)
}

// scriptCall is one script with its KEYS and ARGV.
type scriptCall struct {
	script *redis.Script
	keys   []string
	args   []any
}

// latch is where a last release records that it ran, so that its re-send
// answers from the record (see released_by in scripts/holds.lua): the
// owner's latch key, the request's ID and how long the record lives (the
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
}

// noBound is a waitPlan's poll when only the lock's TTL (or the client's
// max-poll for a lock without expiry) bounds the wait.
const noBound time.Duration = 1<<63 - 1

// newKind returns the kind of a lock called name configured by cfg.
func newKind(name string, cfg LockConfig) kind {
	h := hashLock{name: name, token: base.DerivedKey(base.TokenPrefix, name), fencing: boolArg(cfg.Fencing)}
	if cfg.Kind == Fair {
		return &fairKind{hashLock: h, channel: base.Channel(name), queueTimeout: cfg.QueueTimeout,
			queue: base.DerivedKey(base.QueuePrefix, name), timeouts: base.DerivedKey(base.TimeoutPrefix, name)}
	}
	return &reentrantKind{hashLock: h, channel: base.Channel(name)}
}

// hashLock is what the kinds share: the lock hash called name, in which
// each owner field counts its holds, and the fencing token counter.
type hashLock struct {
	name    string
	token   string // the fencing token counter's key
	fencing string // boolArg: draw a token on a grant from free
}

func (k *hashLock) renew(field string, ttl time.Duration) scriptCall {
	return scriptCall{lua.Renew, []string{k.name}, []any{ttl.Milliseconds(), field}}
}

// reentrantKind is Redisson's RLock: one channel per lock, on which every
// release publishes, and waiters that leave no trace on the server.
type reentrantKind struct {
	hashLock
	channel string
}

func (k *reentrantKind) acquire(field string, count int64, lease time.Duration, _ bool) scriptCall {
	return scriptCall{lua.Lock, []string{k.name, k.token}, []any{lease.Milliseconds(), field, count, k.fencing}}
}

func (k *reentrantKind) release(field string, count int64, lease time.Duration, lt latch) scriptCall {
	return scriptCall{lua.Unlock, []string{k.name, k.channel, lt.key},
		[]any{lease.Milliseconds(), field, count, base.UnlockMessage, lt.ttl.Milliseconds(), lt.request}}
}

func (k *reentrantKind) forceUnlock(latch string, replay time.Duration) scriptCall {
	return scriptCall{lua.ForceUnlock, []string{k.name, k.channel, latch}, []any{base.UnlockMessage, replay.Milliseconds()}}
}

// waitPlan: a new call queues behind the client's calls already waiting
// (unless its owner re-enters), which saves an attempt per grant under
// contention and hands grants round the client's waiters in arrival order.
func (k *reentrantKind) waitPlan(string) waitPlan {
	return waitPlan{channel: k.channel, poll: noBound, behind: true}
}

func (k *reentrantKind) leave(string) (scriptCall, bool) { return scriptCall{}, false }

// fairKind is Redisson's RFairLock: granted in queue order; each waiter
// listens on its own channel, "<channel>:<owner field>", on which only a
// release that finds it first in line publishes, and keeps its place by
// renewing it within the queue timeout.
type fairKind struct {
	hashLock
	queue, timeouts string // the queue of owners and their deadlines
	channel         string // the prefix of the waiters' channels
	queueTimeout    time.Duration
}

func (k *fairKind) lineKeys() []string { return []string{k.name, k.queue, k.timeouts} }

func (k *fairKind) acquire(field string, count int64, lease time.Duration, queue bool) scriptCall {
	return scriptCall{lua.FairLock, []string{k.name, k.queue, k.timeouts, k.token},
		[]any{lease.Milliseconds(), field, count, k.fencing, k.queueTimeout.Milliseconds(), boolArg(queue), k.channel, base.UnlockMessage}}
}

func (k *fairKind) release(field string, count int64, lease time.Duration, lt latch) scriptCall {
	return scriptCall{lua.FairUnlock, []string{k.name, k.queue, k.timeouts, lt.key},
		[]any{lease.Milliseconds(), field, count, base.UnlockMessage, lt.ttl.Milliseconds(), k.channel, lt.request}}
}

func (k *fairKind) forceUnlock(latch string, replay time.Duration) scriptCall {
	return scriptCall{lua.FairForceUnlock, []string{k.name, k.queue, k.timeouts, latch},
		[]any{base.UnlockMessage, replay.Milliseconds(), k.channel}}
}

// waitPlan: every attempt of a waiting call queues the owner or renews its
// place, at least every third of the queue timeout.
func (k *fairKind) waitPlan(field string) waitPlan {
	return waitPlan{channel: k.channel + ":" + field, queue: true, poll: k.queueTimeout / 3}
}

func (k *fairKind) leave(field string) (scriptCall, bool) {
	return scriptCall{lua.FairLeave, k.lineKeys(), []any{field, base.UnlockMessage, k.channel}}, true
}

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
