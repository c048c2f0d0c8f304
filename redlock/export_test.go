package redlock

// PendingReleases returns how many background releases of r are still
// running (tests wait for them before inspecting the nodes).
func PendingReleases(r *RedLock) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pending)
}
