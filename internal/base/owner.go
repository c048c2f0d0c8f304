package base

import (
	"context"
	"fmt"
	"strings"
)

type ownerKey struct{}

// MaxOwnerLen is the longest owner ID WithOwner accepts.
const MaxOwnerLen = 256

// WithOwner returns ctx carrying an explicit owner ID (see rlock.WithOwner).
func WithOwner(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, ownerKey{}, id)
}

// OwnerFrom returns the owner ID carried by ctx, if any. It reports
// ErrInvalidArgument for an ID that WithOwner would not accept.
func OwnerFrom(ctx context.Context) (id string, ok bool, err error) {
	id, ok = ctx.Value(ownerKey{}).(string)
	if !ok {
		return "", false, nil
	}
	if err := ValidateOwner(id); err != nil {
		return "", true, err
	}
	return id, true, nil
}

// ValidateOwner reports whether id is usable as an owner ID.
func ValidateOwner(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty owner ID", ErrInvalidArgument)
	case len(id) > MaxOwnerLen:
		return fmt.Errorf("%w: owner ID is %d bytes, more than %d", ErrInvalidArgument, len(id), MaxOwnerLen)
	case id[0] == '#':
		return fmt.Errorf("%w: owner IDs starting with '#' are reserved for lock handles", ErrInvalidArgument)
	case strings.ContainsAny(id, "\x00\r\n"):
		return fmt.Errorf("%w: owner ID contains a control character", ErrInvalidArgument)
	}
	return nil
}
