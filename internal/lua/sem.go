package lua

import "github.com/redis/go-redis/v9"

var semCommonSrc = src("sem_common")

// sem builds a counting-semaphore script: sem_common.lua, clock.lua and
// publish.lua spliced in as it uses them.
func sem(name string) *redis.Script {
	return script(splice(clockSrc, withPublish(splice(semCommonSrc, src(name)))))
}

// The counting semaphore's scripts (package semaphore).
var (
	SemAcquire = sem("sem_acquire")
	SemCancel  = sem("sem_cancel")
	SemRelease = sem("sem_release")
	SemAdd     = sem("sem_add")
	SemSet     = sem("sem_set")
	SemDrain   = sem("sem_drain")
	SemGet     = sem("sem_get")
	SemLeave   = sem("sem_leave")
	SemPass    = sem("sem_pass")
)

// semScripts lists them for All.
func semScripts() []*redis.Script {
	return []*redis.Script{SemAcquire, SemCancel, SemRelease, SemAdd, SemSet, SemDrain, SemGet, SemLeave, SemPass}
}
