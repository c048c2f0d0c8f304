package renewal

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
)

// Issue 15: every Add to a scheduler with nothing registered (a lock taken
// in watchdog mode after the last one was released) woke the loop
// goroutine, although its timer, set for the next tick, fires before the
// new lease can run out: a goroutine switch per lock, and whenever the
// wake-up came after the lock's release, the loop found nothing to renew
// and exited, so that the next Add started a new loop goroutine. Such an
// Add leaves the loop asleep.
func TestAddOfAFreshLeaseLeavesTheLoopAsleep(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never used: no tick comes
	defer rdb.Close()
	synctest.Test(t, func(t *testing.T) {
		s, err := New(rdb)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		l := s.Add("k", "f", time.Now(), func(error) {})
		synctest.Wait() // the loop planned, and sleeps until its first tick
		l.Stop()
		l = s.Add("k", "f", time.Now(), func(error) {})
		l.Stop()
		synctest.Wait()
		s.mu.Lock()
		running := s.running
		s.mu.Unlock()
		if !running {
			t.Fatal("the loop woke up for a fresh lease, found it stopped and exited")
		}
	})
}
