package renewal

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// A tick that comes due while a node's round is in flight parks the node's
// leases, sent the moment that round ends. The parked round was sent as
// parked: a lease stopped meanwhile went out with it, after StopAndWait had
// returned (StopAndWait only waits for rounds already started), so a
// renewal set the watchdog's lease again over an explicit lease set next,
// or over the lock of a holder that released it and took it again. No
// renewal of a lease goes out once StopAndWait returned.
func TestParkedRoundOutlivesStopAndWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sent := make(chan []string, 10)
		release, done := make(chan struct{}), make(chan struct{})
		s, err := New(instant{}, WithLease(3*time.Second), WithInterval(time.Second), WithSendHook(func(_ string, keys []string) {
			sent <- keys
			select { // the node is busy until the test lets the round go
			case <-release:
			case <-done:
			}
		}))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		defer close(done)
		now := time.Now()
		a := s.Add("a", "f", now, func(error) {})
		s.Add("b", "f", now, func(error) {})

		if keys := <-sent; len(keys) != 2 { // the first tick's round, held busy
			t.Fatalf("first round sent %v", keys)
		}
		time.Sleep(time.Second) // the next tick: a and b are parked
		synctest.Wait()
		if late := s.Stats().Late; late != 1 {
			t.Fatalf("%d node rounds parked, want 1", late)
		}
		stopped := make(chan struct{})
		go func() {
			a.StopAndWait()
			close(stopped)
		}()
		synctest.Wait() // StopAndWait waits for the round in flight
		release <- struct{}{}
		var parked []string
		select {
		case <-stopped:
			parked = <-sent
		case parked = <-sent: // before or after StopAndWait returned
		}
		if slices.Contains(parked, "a") {
			t.Fatalf("the parked round renewed %v, a stopped before it started (StopAndWait waited for it too, or returned before it)", parked)
		}
		release <- struct{}{}
		<-stopped
	})
}
