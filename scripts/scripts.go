// Package scripts holds every Lua script rlock runs, one per operation,
// embedded from the .lua files beside this file. Each is a *redis.Script:
// Run sends EVALSHA and falls back to EVAL when the server's script cache
// lacks it (a fresh or failed-over server).
//
// The scripts are portable between Redis 7.0 and miniredis: no shebang
// lines, no FUNCTION, no SPUBLISH. Each documents its KEYS, ARGV and reply
// at the top of its file. All keys a script touches share the lock's hash
// slot, so they run unchanged on Redis Cluster.
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
)

var (
	// Lock acquires one hold of a reentrant lock (see lock.lua).
	Lock = redis.NewScript(lockSrc)
	// Unlock releases one hold of a reentrant lock (see unlock.lua).
	Unlock = redis.NewScript(unlockSrc)
	// ForceUnlock deletes a lock whoever holds it (see force_unlock.lua).
	ForceUnlock = redis.NewScript(forceUnlockSrc)
	// Renew renews a batch of leases for the watchdog (see renew.lua).
	Renew = redis.NewScript(renewSrc)
)

// All lists every script, for preloading (SCRIPT LOAD) on each server.
func All() []*redis.Script {
	return []*redis.Script{Lock, Unlock, ForceUnlock, Renew}
}
