package renewal

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// instant is a client that pipelines and answers every renewal "held" at
// once, without I/O: what a tick costs on it is the scheduler's own work.
type instant struct{}

func (instant) Pipeline() redis.Pipeliner { return &instantPipe{} }

func (instant) Eval(ctx context.Context, _ string, keys []string, _ ...any) *redis.Cmd {
	return held(ctx, len(keys))
}

func (instant) EvalSha(ctx context.Context, _ string, keys []string, _ ...any) *redis.Cmd {
	return held(ctx, len(keys))
}

func (instant) EvalRO(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	c := redis.NewCmd(ctx)
	c.SetErr(errors.New("not used"))
	return c
}

func (i instant) EvalShaRO(ctx context.Context, s string, k []string, a ...any) *redis.Cmd {
	return i.EvalRO(ctx, s, k, a...)
}

func (instant) ScriptExists(ctx context.Context, _ ...string) *redis.BoolSliceCmd {
	return redis.NewBoolSliceCmd(ctx)
}

func (instant) ScriptLoad(ctx context.Context, _ string) *redis.StringCmd {
	return redis.NewStringCmd(ctx)
}

func held(ctx context.Context, n int) *redis.Cmd {
	vals := make([]any, n)
	for i := range vals {
		vals[i] = int64(1)
	}
	c := redis.NewCmd(ctx)
	c.SetVal(vals)
	return c
}

// instantPipe is the part of redis.Pipeliner the scheduler uses; any other
// method would panic on the nil interface.
type instantPipe struct {
	redis.Pipeliner
	cmds []*redis.Cmd
	keys []int
}

func (p *instantPipe) EvalSha(ctx context.Context, sha string, keys []string, _ ...any) *redis.Cmd {
	c := redis.NewCmd(ctx, "evalsha", sha)
	p.cmds = append(p.cmds, c)
	p.keys = append(p.keys, len(keys))
	return c
}

func (p *instantPipe) Eval(ctx context.Context, _ string, keys []string, a ...any) *redis.Cmd {
	return p.EvalSha(ctx, "", keys, a...)
}

func (p *instantPipe) Do(ctx context.Context, args ...any) *redis.Cmd {
	c := redis.NewCmd(ctx, args...)
	p.cmds = append(p.cmds, c)
	p.keys = append(p.keys, args[2].(int))
	return c
}

func (p *instantPipe) Exec(ctx context.Context) ([]redis.Cmder, error) {
	for i, c := range p.cmds {
		c.SetVal(held(ctx, p.keys[i]).Val())
	}
	return nil, nil
}

// BenchmarkTick measures one full renewal round (a tick) over many
// registered locks on a client that answers at once: the snapshot,
// grouping, batching, building the pipeline, reading the replies and
// recording every lock's new expiry. ns/op is one tick.
func BenchmarkTick(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprint(n, "-locks"), func(b *testing.B) {
			// The scheduler's own loop sleeps for an hour: the benchmark
			// drives a loop of its own, one tick at a time.
			s, err := New(instant{}, WithLease(2*time.Hour), WithInterval(time.Hour))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			now := time.Now()
			for i := range n {
				s.Add(fmt.Sprint("bench:", i), "c:1", now, func(error) { b.Error("lost") })
			}
			lp := newLoop(s)
			b.ReportAllocs()
			for b.Loop() {
				now := time.Now()
				lp.tick(now)
				for lp.busy > 0 {
					lp.finish(<-lp.results, time.Now())
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/lock")
			if st := s.Stats(); st.Renewed < uint64(b.N*n) || st.Errors > 0 {
				b.Fatalf("%+v", st)
			}
		})
	}
}
