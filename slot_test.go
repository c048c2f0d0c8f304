package rlock_test

import (
	"testing"

	"github.com/rlock-go/rlock"
)

func TestSlot(t *testing.T) {
	// Reference values from the Redis Cluster specification and CLUSTER KEYSLOT.
	cases := map[string]int{
		"123456789":                     12739,
		"foo":                           12182,
		"{user1000}.following":          rlock.Slot("user1000"),
		"redisson_lock__channel:{lock}": rlock.Slot("lock"),
		"foo{}{bar}":                    rlock.Slot("foo{}{bar}"),
		"":                              0,
	}
	for key, want := range cases {
		if got := rlock.Slot(key); got != want {
			t.Errorf("rlock.Slot(%q) = %d, want %d", key, got, want)
		}
	}
}
