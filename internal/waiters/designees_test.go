package waiters

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// A release names two clients in one message (scripts/designate.lua's
// pair): the hub must read both tags back, and a Redisson subscriber must
// still decode the message as a Java long it ignores.
func TestDesignees(t *testing.T) {
	for _, c := range []struct {
		payload, first, second string
		ok                     bool
	}{
		{"0", "", "", false},
		{"1", "", "", false},
		{"", "", "", false},
		{"12a", "", "", false},
		{"12345678901234567890", "", "", false}, // 20 digits: not a long
		{"2", "2", "", true},
		{"999999999", "999999999", "", true},
		{"4611686018427387905", "4611686018427387905", "", true}, // an older client's tag, alone
		{"1000000002999999999", "2", "999999999", true},
		{"1123456789000000042", "123456789", "42", true},
	} {
		first, second, ok := designees(c.payload)
		require.Equal(t, c.ok, ok, "%q", c.payload)
		require.Equal(t, c.first, first, "%q", c.payload)
		require.Equal(t, c.second, second, "%q", c.payload)
	}
}

func TestTagsPairIntoAJavaLong(t *testing.T) {
	for i := range 10000 {
		tag := Tag(fmt.Sprint("client-", i))
		n, err := strconv.ParseUint(tag, 10, 64)
		require.NoError(t, err)
		require.True(t, n >= 2 && n <= maxTag, "tag %d", n)
	}
	most := fmt.Sprintf("1%09d%09d", maxTag, maxTag)
	_, err := strconv.ParseInt(most, 10, 64)
	require.NoError(t, err, "the largest pair is a Java long")
	first, second, ok := designees(most)
	require.True(t, ok)
	require.Equal(t, []string{strconv.Itoa(maxTag), strconv.Itoa(maxTag)}, []string{first, second})
}
