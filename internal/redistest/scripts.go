package redistest

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock/internal/lua"
)

// LoadScripts loads every rlock script on the servers behind rdb (SCRIPT
// LOAD; a ClusterClient loads them on every master), so that a reply a test
// drops belongs to an EVALSHA that ran, not to one answered NOSCRIPT.
func LoadScripts(t testing.TB, rdb redis.Scripter) {
	t.Helper()
	for _, s := range lua.All() {
		if err := s.Load(context.Background(), rdb).Err(); err != nil {
			t.Fatalf("loading the scripts: %v", err)
		}
	}
}
