package reentrant_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
)

// WithAutoPipeline's behaviour is tested by the tests that run under
// clientVariants (exclusion, lost replies) and by fair's FIFO test.

// TestAutoPipelineNeedsGoRedis: a Redis that is not a go-redis client has no
// auto-pipeliner; NewClient says so instead of ignoring the option.
func TestAutoPipelineNeedsGoRedis(t *testing.T) {
	b := redistest.Mini(t)
	wrapped := struct{ rlock.Redis }{b.NewClient(t)}
	_, err := rlock.NewClient(wrapped, rlock.WithAutoPipeline())
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	require.ErrorContains(t, err, "auto-pipelining")
}
