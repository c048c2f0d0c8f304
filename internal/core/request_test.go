package core

import (
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// Request IDs are recorded in every lock's replay latch, which each last
// release reads and writes back whole: a UUID client ID (the default) now
// prefixes them in 23 characters instead of 36, and no two client IDs
// give one prefix.
func TestRequestPrefixShortAndUnique(t *testing.T) {
	id := uuid.NewString()
	p := requestPrefix(id)
	require.Len(t, p, 23)
	require.True(t, strings.HasPrefix(p, "~"))
	require.NotContains(t, p, "\n")
	require.NotContains(t, p, ":")

	u := uuid.MustParse(id)
	ids := []string{
		id,
		strings.ToUpper(id), // not the canonical form: kept as it is
		p,                   // an ID that spells another's prefix
		"~" + p,             // and one more "~"
		"service-a", "~service-a", "~~service-a",
		u.String(), // the same UUID: the same prefix (the same client ID)
		uuid.NewString(),
	}
	seen := map[string]string{}
	for _, id := range ids {
		prefix := requestPrefix(id)
		if other, ok := seen[prefix]; ok && other != id {
			t.Fatalf("client IDs %q and %q share the request prefix %q", other, id, prefix)
		}
		seen[prefix] = id
	}
	require.Equal(t, "service-a", requestPrefix("service-a"))
}
