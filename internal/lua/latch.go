package lua

import "github.com/redis/go-redis/v9"

var latchCommonSrc = src("latch_common")

// latch builds a count-down latch script: the preludes clock.lua,
// latch_common.lua and publish.lua, then the script itself.
func latch(name string) *redis.Script {
	return script(withPublish(splice(clockSrc, splice(latchCommonSrc, src(name)))))
}

var (
	// LatchTrySet sets a count-down latch's count (see latch_try_set.lua).
	LatchTrySet = latch("latch_try_set")
	// LatchCountDown counts a latch down by one (see latch_count_down.lua).
	LatchCountDown = latch("latch_count_down")
	// LatchDelete deletes a latch (see latch_delete.lua).
	LatchDelete = latch("latch_delete")
)

// Latch lists the count-down latch scripts, for preloading.
func Latch() []*redis.Script { return []*redis.Script{LatchTrySet, LatchCountDown, LatchDelete} }
