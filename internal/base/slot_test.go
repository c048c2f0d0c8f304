package base_test

import (
	"testing"

	"github.com/rlock-go/rlock/internal/base"
)

func TestSlot(t *testing.T) {
	// Reference values from the Redis Cluster specification and CLUSTER KEYSLOT.
	cases := map[string]int{
		"123456789":                     12739,
		"foo":                           12182,
		"{user1000}.following":          base.Slot("user1000"),
		"redisson_lock__channel:{lock}": base.Slot("lock"),
		"foo{}{bar}":                    base.Slot("foo{}{bar}"),
		"":                              0,
	}
	for key, want := range cases {
		if got := base.Slot(key); got != want {
			t.Errorf("base.Slot(%q) = %d, want %d", key, got, want)
		}
	}
}
