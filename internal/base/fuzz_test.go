package base_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/base"
)

// Fuzz targets for every function of the root package that takes user
// input. `go test` runs their seed corpora; `go test -fuzz FuzzX .` fuzzes.

// FuzzValidateName: any string is accepted or refused with
// ErrInvalidArgument, by the documented rule, and never panics.
func FuzzValidateName(f *testing.F) {
	for _, s := range []string{"", "x", "orders:42", "{tag}:n", strings.Repeat("n", base.MaxNameLen), strings.Repeat("n", base.MaxNameLen+1), "\x00", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := base.ValidateName(name)
		valid := name != "" && len(name) <= base.MaxNameLen
		if valid != (err == nil) {
			t.Fatalf("ValidateName(%q) = %v", name, err)
		}
		if err != nil && !errors.Is(err, base.ErrInvalidArgument) {
			t.Fatalf("ValidateName(%q) = %v, not ErrInvalidArgument", name, err)
		}
	})
}

// FuzzOwner: ValidateOwner follows its documented rule, and an owner carried
// by WithOwner comes back from OwnerFrom unchanged, or refused the same way.
func FuzzOwner(f *testing.F) {
	for _, s := range []string{"", "worker-1", "#1", "a\nb", "a\rb", "a\x00b", strings.Repeat("o", base.MaxOwnerLen), strings.Repeat("o", base.MaxOwnerLen+1)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		err := base.ValidateOwner(id)
		valid := id != "" && len(id) <= base.MaxOwnerLen && id[0] != '#' && !strings.ContainsAny(id, "\x00\r\n")
		if valid != (err == nil) {
			t.Fatalf("ValidateOwner(%q) = %v", id, err)
		}
		if err != nil && !errors.Is(err, base.ErrInvalidArgument) {
			t.Fatalf("ValidateOwner(%q) = %v, not ErrInvalidArgument", id, err)
		}
		got, ok, err2 := base.OwnerFrom(base.WithOwner(context.Background(), id))
		if !ok || (err == nil) != (err2 == nil) || (err2 == nil && got != id) {
			t.Fatalf("OwnerFrom(WithOwner(%q)) = %q, %v, %v", id, got, ok, err2)
		}
	})
}

// FuzzDerivedKey: every derived key of a name lands in the name's hash slot
// (Redis Cluster), for every name ValidateName accepts.
func FuzzDerivedKey(f *testing.F) {
	for _, s := range []string{"x", "orders:42", "{user7}:cart", "a{b}c", "{{x}}", "x}{y}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if base.ValidateName(name) != nil {
			t.Skip("refused: see TestBraceWithoutTagIsRefused")
		}
		for _, p := range []string{base.ChannelPrefix, base.LatchPrefix, base.QueuePrefix, base.TimeoutPrefix, base.TokenPrefix, base.WaitersPrefix} {
			if got, want := base.Slot(base.DerivedKey(p, name)), base.Slot(name); got != want {
				t.Fatalf("DerivedKey(%q, %q) is in slot %d, the name in %d", p, name, got, want)
			}
		}
	})
}

// TestBraceWithoutTagIsRefused: DerivedKey returns "prefix:name" for any
// name containing '{', assuming the name's own hash tag governs. For a name
// with a brace but no hash tag ("{", "{}", "}{", "a{}b{c}", "x}y") Redis
// Cluster hashes the whole key, so the derived keys and the name would land
// in different slots (CROSSSLOT on every unlock). Found by FuzzDerivedKey;
// ValidateName now refuses such names, which keeps Redisson's layout.
func TestBraceWithoutTagIsRefused(t *testing.T) {
	for _, name := range []string{"{", "{}", "}{", "a{}b{c}", "x{", "x}y", "}"} {
		require.ErrorIs(t, base.ValidateName(name), base.ErrInvalidArgument, name)
	}
	for _, name := range []string{"{a}", "x{y}z", "{{x}}", "x}{y}"} {
		require.NoError(t, base.ValidateName(name), name)
	}
}
