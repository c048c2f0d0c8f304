// Package scripts holds every Lua script rlock runs, one per operation,
// embedded from the .lua files beside this file. Each is a *redis.Script:
// Run sends EVALSHA and falls back to EVAL when the server's script cache
// lacks it (a fresh or failed-over server).
//
// The scripts are portable between Redis 7.0 and miniredis: no shebang
// lines, no FUNCTION, no SPUBLISH. Each documents its KEYS, ARGV and reply
// at the top of its file. All keys a script touches share the lock's hash
// slot, so they run unchanged on Redis Cluster. Shared Lua lives in
// preludes prepended when a script is built: holds.lua (hold counts,
// re-sent commands, fencing tokens, holder checks) for every acquire,
// release and force-unlock script,
// fair_common.lua (queue pruning, wake-ups) for the fair-lock scripts.
package scripts

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lock.lua
	lockSrc string
	//go:embed unlock.lua
	unlockSrc string
	//go:embed force_unlock.lua
	forceUnlockSrc string
	//go:embed renew.lua
	renewSrc string
	//go:embed holds.lua
	holdsSrc string
	//go:embed fair_common.lua
	fairCommonSrc string
	//go:embed fair_lock.lua
	fairLockSrc string
	//go:embed fair_unlock.lua
	fairUnlockSrc string
	//go:embed fair_force_unlock.lua
	fairForceUnlockSrc string
	//go:embed fair_leave.lua
	fairLeaveSrc string
	//go:embed fair_queue.lua
	fairQueueSrc string
)

var (
	// Lock acquires one hold of a reentrant lock (see lock.lua).
	Lock = redis.NewScript(holdsSrc + "\n" + lockSrc)
	// Unlock releases one hold of a reentrant lock (see unlock.lua).
	Unlock = redis.NewScript(holdsSrc + "\n" + unlockSrc)
	// ForceUnlock deletes a lock whoever holds it (see force_unlock.lua).
	ForceUnlock = redis.NewScript(holdsSrc + "\n" + forceUnlockSrc)
	// Renew renews a batch of leases for the watchdog (see renew.lua). It
	// serves both lock kinds: a fair lock's hash is a reentrant lock's.
	Renew = redis.NewScript(renewSrc)

	// FairLock acquires one hold of a fair lock or queues for it (see
	// fair_lock.lua).
	FairLock = fair(holdsSrc + "\n" + fairLockSrc)
	// FairUnlock releases one hold of a fair lock (see fair_unlock.lua).
	FairUnlock = fair(holdsSrc + "\n" + fairUnlockSrc)
	// FairForceUnlock deletes a fair lock whoever holds it (see
	// fair_force_unlock.lua).
	FairForceUnlock = fair(holdsSrc + "\n" + fairForceUnlockSrc)
	// FairLeave takes a waiter out of a fair lock's queue (see
	// fair_leave.lua).
	FairLeave = fair(fairLeaveSrc)
	// FairQueue reads a fair lock's queue (see fair_queue.lua).
	FairQueue = fair(fairQueueSrc)
)

func fair(src string) *redis.Script { return redis.NewScript(fairCommonSrc + "\n" + src) }

// All lists every script, for preloading (SCRIPT LOAD) on each server.
func All() []*redis.Script {
	return []*redis.Script{Lock, Unlock, ForceUnlock, Renew,
		FairLock, FairUnlock, FairForceUnlock, FairLeave, FairQueue}
}
