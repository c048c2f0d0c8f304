package rlock_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/rlock-go/rlock/internal/redistest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(redistest.StopSharedAfter(m))
}
