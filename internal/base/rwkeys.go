package base

import (
	"strconv"
	"strings"
)

// Read-write lock keys, channel and messages. The channel, the hash and
// the timeout keys are Redisson's RReadWriteLock layout; the writer-wait
// set is rlock's own (Redisson does not read it). See
// scripts/rw_common.lua.
const (
	RWChannelPrefix    = "redisson_rwlock"             // read-write lock notifications
	WriterWaitPrefix   = "redisson_rwlock_writer_wait" // waiting writers that keep new readers out
	RWModeField        = "mode"                        // the hash field holding "read" or "write"
	WriterFieldSuffix  = ":write"                      // ends a writer's field
	rwTimeoutKeySuffix = ":rwlock_timeout:"
)

// ReadUnlockMessage is the payload that wakes every waiter of a lock's
// channel: published by a read-write lock's last write release, force
// unlock, and by the last waiting writer giving up. (Redisson names it
// after the read lock; UnlockMessage wakes one waiter per client.)
const ReadUnlockMessage = "1"

// RWChannel returns the channel of read-write lock name,
// "redisson_rwlock:{name}".
func RWChannel(name string) string { return DerivedKey(RWChannelPrefix, name) }

// WriterWait returns the writer-wait set of read-write lock name.
func WriterWait(name string) string { return DerivedKey(WriterWaitPrefix, name) }

// WriterField returns the field under which the owner of reader field
// holds the write lock.
func WriterField(field string) string { return field + WriterFieldSuffix }

// SuffixKey returns the key that belongs to lock name with suffix, by
// Redisson's suffix rule: "{name}:suffix", or "name:suffix" when the name
// already contains "{". Either way it lands in name's hash slot.
func SuffixKey(name, suffix string) string {
	if strings.Contains(name, "{") {
		return name + ":" + suffix
	}
	return "{" + name + "}:" + suffix
}

// RWTimeoutKey returns the timeout key of read hold n (1-based) of reader
// field on read-write lock name: "{name}:<field>:rwlock_timeout:<n>".
func RWTimeoutKey(name, field string, n int64) string {
	return SuffixKey(name, field+rwTimeoutKeySuffix+strconv.FormatInt(n, 10))
}

// rlock's own read-write lock keys: the registries of the rlock clients
// with waiting writers and with waiting readers (sorted sets of client
// tags scored by the server time until which each registration is live,
// as Waiters). A last write release designates a client of the writers'
// registry to wake one writer, unless the readers' registry has a live
// client (readers then enter as a group: every waiter is woken).
const (
	RWWaitersPrefix = "rlock_rwlock_waiters"
	RWReadersPrefix = "rlock_rwlock_readers"
)

// RWWaiters returns the registry of the clients with writers waiting for
// read-write lock name.
func RWWaiters(name string) string { return DerivedKey(RWWaitersPrefix, name) }

// RWReaders returns the registry of the clients with readers waiting for
// read-write lock name.
func RWReaders(name string) string { return DerivedKey(RWReadersPrefix, name) }

// RWUntilKey returns the key recording the end of writer field wfield's
// lease on read-write lock name (see scripts/rw_common.lua).
func RWUntilKey(name, wfield string) string { return SuffixKey(name, wfield+":rwlock_until") }

// RWChannelLocks returns the names of the read-write locks whose channel
// is channel, as ChannelLocks does for the reentrant lock's channels.
func RWChannelLocks(channel string) []string {
	rest, ok := strings.CutPrefix(channel, RWChannelPrefix+":")
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
