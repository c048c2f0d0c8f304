package lua

import "testing"

// TestAllListsEveryScript: All is what preloading (SCRIPT LOAD, on every
// master of a Cluster) and the lost-reply tests rely on to cache every
// script, so a script missing from it is answered NOSCRIPT the first time
// and a dropped reply may belong to no run. The latch's scripts were
// missing.
func TestAllListsEveryScript(t *testing.T) {
	in := map[string]bool{}
	for _, s := range All() {
		in[s.Hash()] = true // sem_release and sem_add share one source, so one SHA
	}
	for s, src := range assembled {
		if !in[s.Hash()] {
			t.Errorf("All does not list the script beginning %.120q", src)
		}
	}
}
