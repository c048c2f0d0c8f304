// Package scripts holds every Lua script rlock runs, one per operation,
// embedded from the .lua files beside this file. The client sends each
// with EVALSHA, falling back to EVAL when the server's script cache lacks
// it (a fresh or failed-over server); nothing is sent inline on every call.
//
// The scripts are portable between Redis 7.0 and miniredis: no shebang
// lines, no FUNCTION, and SPUBLISH only when the caller asks for it
// (publish.lua; the client does so only on a cluster that answered its
// sharded pub/sub probe). Each documents its KEYS, ARGV and reply
// at the top of its file. All keys a script touches share the lock's hash
// slot, so they run unchanged on Redis Cluster. Shared Lua lives in
// preludes prepended when a script is built: holds.lua (hold counts,
// re-sent commands, fencing tokens, holder checks) for every acquire,
// release and force-unlock script,
// clock.lua (the server's time) for the reentrant, fair-lock and
// read-write-lock scripts, designate.lua (the registry of waiting clients
// and the designation of the client that wakes a waiter) for the reentrant
// lock's acquire, release and pass-on scripts,
// fair_common.lua (queue pruning, wake-ups) for the fair-lock scripts,
// rw_common.lua (read-write layout, timeout keys, waiting writers) for the
// read-write-lock scripts and renew.lua, sem_common.lua (the counter and
// the operation record) for the semaphore scripts (sem_*.lua, exp_*.lua),
// exp_common.lua (the reclaim of expired permits) for the expirable
// semaphore's, and publish.lua (classic or sharded publishing) for every
// script that wakes waiters.
package scripts

import (
	"embed"
	"io/fs"
)

//go:embed *.lua
var files embed.FS

// Files returns the Lua files, read-only, as they are embedded in the
// library: to read or audit what rlock runs on the server.
func Files() fs.FS { return files }
