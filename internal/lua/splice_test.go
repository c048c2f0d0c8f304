package lua

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Preludes spliced at the marker keep the order they would have in front
// (the last spliced first), after the fast path.
func TestSpliceKeepsPreludeOrderAfterFastPath(t *testing.T) {
	outer, inner := "local outer = 1\n", "local inner = outer\n"
	script := "fast\n" + preludesHere + "\nreturn inner\n"
	got := splice(outer, splice(inner, script))
	require.Equal(t, "fast\n"+preludesHere+"\n"+outer+"\n"+inner+"\nreturn inner\n", got)
	require.Equal(t, outer+"\n"+inner+"\nreturn inner\n", splice(outer, splice(inner, "return inner\n")))
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

// Every script defines only the prelude definitions it uses, and every
// prelude name it uses is defined before use.
func TestScriptsDefineOnlyThePreludesTheyUse(t *testing.T) {
	preludes := holdsSrc + clockSrc + publishSrc + fairCommonSrc + rwCommonSrc + designateSrc + semCommonSrc + expCommonSrc
	var names []string
	for line := range strings.Lines(preludes) {
		if m := definition.FindStringSubmatch(line); m != nil {
			names = append(names, m[1])
		}
	}
	for s, src := range assembled {
		name := s.Hash()
		for _, n := range names {
			def := regexp.MustCompile(`(?m)^local (function )?` + n + `\b`)
			use := regexp.MustCompile(`\b` + n + `\b`)
			loc := def.FindStringIndex(src)
			if loc == nil {
				require.False(t, use.MatchString(src), "%s uses %s without defining it", name, n)
				continue
			}
			rest := src[loc[1]:]
			require.True(t, use.MatchString(rest), "%s defines %s but never uses it", name, n)
		}
	}
}

func TestUsedKeepsWhatIsUsedTransitively(t *testing.T) {
	prelude := "local function a()\n  return 1\nend\nlocal function b()\n  return a()\nend\nlocal c = 3\n"
	require.Equal(t, "local function a()\n  return 1\nend\nlocal function b()\n  return a()\nend\n", used(prelude, "return b()\n"))
	require.Equal(t, "local c = 3\n", used(prelude, "return c\n"))
	require.Empty(t, used(prelude, "return 0\n"))
}
