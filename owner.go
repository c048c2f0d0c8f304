package rlock

import (
	"context"

	"github.com/rlock-go/rlock/internal/base"
)

// WithOwner returns a context that carries an explicit owner ID. Every lock
// operation made with that context (or a context derived from it) acts on
// behalf of that owner instead of the lock handle's own identity, so nested
// code that builds its own handle for the same name re-enters the lock
// instead of deadlocking on it. Owner IDs are scoped to one client: the
// Redis hash field is "<clientID>:<ownerID>", so the same ID on two clients
// names two different owners.
//
// The ID must be non-empty, at most 256 bytes, free of NUL, CR and LF, and
// must not start with '#' (reserved for the IDs lock handles give
// themselves); a bad ID is reported as ErrInvalidArgument by the operation
// that uses the context, before any I/O.
func WithOwner(ctx context.Context, id string) context.Context {
	return base.WithOwner(ctx, id)
}
