package lua_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rlock-go/rlock/internal/lua"
	"github.com/rlock-go/rlock/internal/redistest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(redistest.StopSharedAfter(m))
}

// Every script compiles on both servers and is addressed by its SHA1.
func TestScriptsLoad(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.NewClient(t)
		for _, s := range lua.All() {
			sha, err := s.Load(ctx, rdb).Result()
			require.NoError(t, err)
			require.Equal(t, s.Hash(), sha)
		}
	})
}
