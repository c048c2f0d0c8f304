package renewal_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/renewal"
)

// FuzzNewOptions: any lease, interval and batch size give a scheduler with
// exactly those settings (interval defaulting to lease/3) or
// ErrInvalidArgument by the documented rules; never a panic. `go test` runs
// the seeds; `go test -fuzz FuzzNewOptions ./watchdog` fuzzes.
func FuzzNewOptions(f *testing.F) {
	f.Add(int64(30*time.Second), int64(0), 100)
	f.Add(int64(3*time.Millisecond), int64(0), 1)
	f.Add(int64(2*time.Millisecond), int64(0), 1)
	f.Add(int64(time.Second), int64(time.Second), 10000)
	f.Add(int64(time.Second), int64(-1), 10001)
	f.Add(int64(-1), int64(1), 0)
	f.Add(int64(1<<62), int64(1<<61), 5)
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	f.Cleanup(func() { _ = rdb.Close() })
	f.Fuzz(func(t *testing.T, lease, interval int64, batch int) {
		opts := []renewal.Option{renewal.WithLease(time.Duration(lease)), renewal.WithBatchSize(batch)}
		if interval != 0 {
			opts = append(opts, renewal.WithInterval(time.Duration(interval)))
		}
		s, err := renewal.New(rdb, opts...)
		wantInterval := time.Duration(interval)
		if interval == 0 {
			wantInterval = time.Duration(lease) / 3
		}
		valid := time.Duration(lease) >= 3*time.Millisecond && batch >= 1 && batch <= 10000 &&
			wantInterval > 0 && wantInterval < time.Duration(lease)
		if valid != (err == nil) {
			t.Fatalf("New(lease %d, interval %d, batch %d) = %v", lease, interval, batch, err)
		}
		if err != nil {
			if !errors.Is(err, rlock.ErrInvalidArgument) {
				t.Fatalf("New(lease %d, interval %d, batch %d) = %v, not ErrInvalidArgument", lease, interval, batch, err)
			}
			return
		}
		defer s.Close()
		if s.LeaseDuration() != time.Duration(lease) || s.Interval() != wantInterval {
			t.Fatalf("New(lease %d, interval %d) has lease %v, interval %v", lease, interval, s.LeaseDuration(), s.Interval())
		}
	})
}
