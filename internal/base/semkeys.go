package base

import "strings"

// Semaphore names (package semaphore), Redisson's RSemaphore and
// RPermitExpirableSemaphore: the counter is the key named by the
// semaphore; the rest is in its hash slot.
const (
	// SemaphoreChannelPrefix is the prefix of a semaphore's channel,
	// "redisson_sc:{name}".
	SemaphoreChannelPrefix = "redisson_sc"
	// SemaphoreNoLeaseScore is the score Redisson gives a permit without a
	// lease in an expirable semaphore's timeout set ("never expires").
	SemaphoreNoLeaseScore = 922337203685477
)

// Suffixed is Redisson's suffixName: "{name}:s", or "name:s" for a name
// with a hash tag; either way in name's hash slot.
func Suffixed(name, s string) string {
	if strings.Contains(name, "{") {
		return name + ":" + s
	}
	return "{" + name + "}:" + s
}

// SemaphoreChannel returns the channel of semaphore name.
func SemaphoreChannel(name string) string { return DerivedKey(SemaphoreChannelPrefix, name) }

// SemaphoreTimeout returns the timeout set of expirable semaphore name,
// "{name}:timeout": its held permits scored by their expiry.
func SemaphoreTimeout(name string) string { return Suffixed(name, "timeout") }

// SemaphoreOps returns the operation record of semaphore name,
// "{name}:rlock_ops" (rlock's own).
func SemaphoreOps(name string) string { return Suffixed(name, "rlock_ops") }

// SemaphoreWaiters returns the registry of rlock clients waiting for
// permits of semaphore name, "{name}:rlock_waiters" (rlock's own): the
// clients a release designates to wake a waiter.
func SemaphoreWaiters(name string) string { return Suffixed(name, "rlock_waiters") }

// SemaphoreWatch returns the expiry watch of expirable semaphore name,
// "{name}:rlock_watch" (rlock's own): the one rlock client that reclaims
// permits at the nearest expiry and designates waiters for them.
func SemaphoreWatch(name string) string { return Suffixed(name, "rlock_watch") }
