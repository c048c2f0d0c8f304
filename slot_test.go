package rlock

import "testing"

func TestSlot(t *testing.T) {
	// Reference values from the Redis Cluster specification and CLUSTER KEYSLOT.
	cases := map[string]int{
		"123456789":                     12739,
		"foo":                           12182,
		"{user1000}.following":          Slot("user1000"),
		"redisson_lock__channel:{lock}": Slot("lock"),
		"foo{}{bar}":                    Slot("foo{}{bar}"),
		"":                              0,
	}
	for key, want := range cases {
		if got := Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
}
