package lua

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Preludes spliced at the marker keep the order they would have in front
// (the last spliced first), after the fast path.
func TestSpliceKeepsPreludeOrderAfterFastPath(t *testing.T) {
	script := "fast\n" + preludesHere + "\nslow\n"
	got := splice("outer", splice("inner", script))
	require.Equal(t, "fast\n"+preludesHere+"\nouter\ninner\nslow\n", got)
	require.Equal(t, "outer\ninner\nbody\n", splice("outer", splice("inner", "body\n")))
}

// The reentrant lock's uncontended calls return before any prelude
// function is defined: their fast paths come first and use no prelude.
func TestReentrantFastPathsComeBeforePreludes(t *testing.T) {
	for _, name := range []string{"lock", "unlock"} {
		src := reentrantSrc(withHolds(name))
		fast, _, ok := strings.Cut(src, preludesHere+"\n")
		require.True(t, ok, name)
		require.Contains(t, fast, "return {1", name)
		require.NotContains(t, fast, "local function", name)
		for _, f := range []string{"now_ms(", "notify(", "designate(", "register(", "holds_of(", "grant(", "release(", "set_latch(", "fencing_token("} {
			require.NotContains(t, fast, f, "%s's fast path uses the prelude function %s", name, f)
		}
	}
}
