package lua

import "github.com/redis/go-redis/v9"

var expCommonSrc = src("exp_common")

// exp builds an expirable-semaphore script: exp_common.lua,
// sem_common.lua, clock.lua and publish.lua spliced in as it uses them.
func exp(name string) *redis.Script {
	return script(splice(clockSrc, withPublish(splice(semCommonSrc, splice(expCommonSrc, src(name))))))
}

// The expirable semaphore's scripts (package semaphore). It shares
// TrySetPermits, AddPermits and DrainPermits with the counting semaphore.
var (
	ExpAcquire = exp("exp_acquire")
	ExpRelease = exp("exp_release")
	ExpUpdate  = exp("exp_update")
	ExpState   = exp("exp_state")
	ExpLease   = exp("exp_lease")
	ExpDrain   = exp("exp_drain")
	// ExpWatch is the expiry watch's call (see exp_watch.lua).
	ExpWatch = exp("exp_watch")
)

func expScripts() []*redis.Script {
	return []*redis.Script{ExpAcquire, ExpRelease, ExpUpdate, ExpState, ExpLease, ExpDrain, ExpWatch}
}
