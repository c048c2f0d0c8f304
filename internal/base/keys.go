package base

import (
	"fmt"
	"strings"
)

// MaxNameLen is the longest lock name rlock accepts.
const MaxNameLen = 1024

// Redis key and channel prefixes. They match Redisson's byte for byte, so a
// Java service on Redisson and a Go service on rlock can share a lock.
const (
	ChannelPrefix = "redisson_lock__channel" // unlock notifications
	LatchPrefix   = "redisson_unlock_latch"  // replay protection for releases
	QueuePrefix   = "redisson_lock_queue"    // fair lock: waiting owners, FIFO
	TimeoutPrefix = "redisson_lock_timeout"  // fair lock: waiter deadlines
	TokenPrefix   = "redisson_lock_token"    // fencing token counter
	// WaitersPrefix is rlock's own: the clients with waiters on a
	// reentrant lock (see Waiters).
	WaitersPrefix = "rlock_lock_waiters"
)

// UnlockMessage is the payload published on a lock's channel when it is
// released or force-unlocked.
const UnlockMessage = "0"

// ValidateName reports whether name is usable as a lock name: non-empty,
// at most MaxNameLen bytes, and, if it contains a brace, with a Redis
// Cluster hash tag ("{tag}": a '{' followed later by a '}' with at least
// one byte between). A name with a stray brace ("{", "a{}b", "x}y") would
// put the lock's derived keys in another hash slot than the lock, which
// Redis Cluster refuses. The name itself is the Redis key of the lock hash.
func ValidateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty lock name", ErrInvalidArgument)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: lock name is %d bytes, more than %d", ErrInvalidArgument, len(name), MaxNameLen)
	case strings.ContainsAny(name, "{}") && !hasHashTag(name):
		return fmt.Errorf("%w: lock name %q has a brace but no hash tag {...}", ErrInvalidArgument, name)
	}
	return nil
}

// hasHashTag reports whether key has a Redis Cluster hash tag.
func hasHashTag(key string) bool {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return false
	}
	return strings.IndexByte(key[open+1:], '}') > 0
}

// DerivedKey returns the key or channel that belongs to lock name under
// prefix, following the Redis Cluster hash-tag rule: "prefix:{name}", or
// "prefix:name" when the name already contains "{" (the user's own hash tag
// then governs). Either way it lands in the same hash slot as name itself.
func DerivedKey(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// Waiters returns the registry of the rlock clients waiting for reentrant
// lock name: a sorted set of client tags (see waiters.Tag) scored by the
// server time (ms) until which each registration is live. A release
// designates a live client from it to wake a waiter (scripts/unlock.lua).
func Waiters(name string) string { return DerivedKey(WaitersPrefix, name) }

// Channel returns the unlock channel of lock name.
func Channel(name string) string { return DerivedKey(ChannelPrefix, name) }

// ChannelLocks returns the names of the locks whose unlock channel is
// channel: none for another channel, two for "redisson_lock__channel:{x}"
// (the channel of both "x" and "{x}"), one otherwise.
func ChannelLocks(channel string) []string {
	rest, ok := strings.CutPrefix(channel, ChannelPrefix+":")
	if !ok || rest == "" {
		return nil
	}
	if inner, ok := strings.CutPrefix(rest, "{"); ok && strings.HasSuffix(inner, "}") {
		inner = strings.TrimSuffix(inner, "}")
		if inner != "" && !strings.ContainsAny(inner, "{}") {
			return []string{inner, rest}
		}
	}
	return []string{rest}
}
