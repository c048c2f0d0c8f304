package faults

import (
	"regexp"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/redistest"
)

// redirect matches a MOVED or ASK reply: a redirect the library must follow.
var redirect = regexp.MustCompile(`\b(MOVED|ASK) \d+ `)

// TestFaultSlotMigration: the lock's slot is moved from master to master,
// over and over, while eight clients take and release the lock on a
// cluster whose masters have replicas (so replica sync is on, as by
// default). Each migration stays a moment with the slot marked migrating
// (TRYAGAIN for scripts whose keys are split), a moment with its keys moved
// (ASK), and then ends (MOVED for every client that has not reloaded its
// slot map). Every redirect must be followed as the ClusterClient follows
// it: a MOVED or ASK reply reaching a caller fails the run (defect 6 of
// issue 12: replica sync did not follow them). The clients' redirect
// budget outlasts a migration, so no TRYAGAIN should reach a caller
// either. The history must stay linearizable and exclusive, with fencing
// tokens increasing (MIGRATE moves the counter along).
func TestFaultSlotMigration(t *testing.T) {
	runSlotMigration(t, "slot migrated between masters (cluster)", false)
}

// TestFaultRWSlotMigration is TestFaultSlotMigration for the read-write
// workload (its hash, its read holds' timeout keys and its write-until
// records share the lock's slot and move with it), under the read-write
// history checks and the holder-vs-server check (a sample that meets a
// redirect or TRYAGAIN gives no verdict). A spy notes what every master
// holds of the slot, so that an exclusion failure shows the servers'
// state beside the calls (see explain_test.go).
//
// Skipped until issue 27's fix: about one run in eight reported exclusion
// violations. A read re-entry that Redis stopped mid-script ("non local
// key", the slot marked migrating) had added its hold, and the client
// took the error for a script that had not run (see
// TestReadReentryScriptFailingMidRun in rwlock).
func TestFaultRWSlotMigration(t *testing.T) {
	runSlotMigration(t, "rw: slot migrated between masters (cluster)", true)
}

func runSlotMigration(t *testing.T, fault string, rw bool) {
	c := redistest.StartCluster(t) // reconfigured: a cluster of its own
	b := &redistest.Backend{
		Name:      redistest.ClusterName,
		Cluster:   c,
		Universal: func(t testing.TB) redis.UniversalClient { return c.NewClient(t) },
	}
	cfg := baseConfig(fault)
	cfg.rw = rw
	cfg.rounds = 40
	if rw {
		// The read-write model's search grows fast with unknown outcomes:
		// 40 rounds (about 500 acquisitions, 28 unknown) did not finish
		// within the checker's minute.
		cfg.rounds = 12
	}
	cfg.section = 20 * time.Millisecond
	cfg.clusterOpts = []func(*redis.ClusterOptions){func(o *redis.ClusterOptions) {
		o.MaxRedirects = 1000 // about 5 s of TRYAGAIN
		o.MinRetryBackoff, o.MaxRetryBackoff = time.Millisecond, 10*time.Millisecond
	}}
	cfg.forbid = func(err error) bool { return redirect.MatchString(err.Error()) }
	migrations := 0
	cfg.inject = func(r *rig, stop <-chan struct{}) {
		slot := base.Slot(r.name)
		if rw {
			var addrs []string
			for _, m := range c.Masters(t) {
				addrs = append(addrs, m.Addr())
			}
			spied := make(chan struct{})
			defer func() { <-spied }()
			go func() {
				defer close(spied)
				r.slotSpy(addrs, stop, 2*time.Millisecond)
			}()
		}
		for !sleepOrStop(50*time.Millisecond, stop) {
			from := c.MasterFor(t, slot)
			var to *redistest.Server
			for _, m := range c.Masters(t) {
				if m.Addr() != from.Addr() {
					to = m // the last other master: each move goes elsewhere
				}
			}
			r.note("migration %d: marking slot %d migrating from %s to %s", migrations+1, slot, from.Addr(), to.Addr())
			mig := c.StartMigration(t, slot, to)
			r.note("migration %d: marked", migrations+1)
			sleepOrStop(20*time.Millisecond, nil) // TRYAGAIN, or served by the old master
			n := mig.MoveKeys(t)
			r.note("migration %d: %d keys moved", migrations+1, n)
			sleepOrStop(20*time.Millisecond, nil) // ASK
			mig.Finish(t)                         // MOVED
			r.note("migration %d: finished, slot %d served by %s", migrations+1, slot, to.Addr())
			migrations++
		}
	}
	r := newRig(t, b, cfg)
	r.run(nil)
	t.Logf("%d migrations of slot %d", migrations, base.Slot(r.name))
	require.GreaterOrEqual(t, migrations, 2)
}
