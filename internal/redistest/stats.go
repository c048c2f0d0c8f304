package redistest

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// CommandStats returns the number of calls of every command the server has
// counted, from INFO commandstats: the line
// "cmdstat_evalsha:calls=3,usec=..." gives "evalsha": 3. Subcommands keep
// Redis' spelling ("client|setinfo"). Run CONFIG RESETSTAT first to count
// from zero. Real Redis only: miniredis does not keep these statistics.
func CommandStats(t testing.TB, c *redis.Client) map[string]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatalf("redistest: INFO commandstats: %v", err)
	}
	stats, err := parseCommandStats(info)
	if err != nil {
		t.Fatalf("redistest: INFO commandstats: %v", err)
	}
	return stats
}

// CommandsDuring resets the server's command statistics (CONFIG
// RESETSTAT), runs fn and returns CommandStats: the commands the server
// ran meanwhile, the RESETSTAT itself included. Real Redis only.
func CommandsDuring(t testing.TB, c *redis.Client, fn func()) map[string]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatalf("redistest: CONFIG RESETSTAT: %v", err)
	}
	fn()
	return CommandStats(t, c)
}

func parseCommandStats(info string) (map[string]int64, error) {
	stats := make(map[string]int64)
	for line := range strings.SplitSeq(info, "\n") {
		line = strings.TrimSpace(line)
		rest, ok := strings.CutPrefix(line, "cmdstat_")
		if !ok {
			continue
		}
		name, fields, ok := strings.Cut(rest, ":")
		if !ok {
			return nil, &parseError{line}
		}
		found := false
		for field := range strings.SplitSeq(fields, ",") {
			value, ok := strings.CutPrefix(field, "calls=")
			if !ok {
				continue
			}
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				return nil, &parseError{line}
			}
			stats[strings.ToLower(name)] = n
			found = true
			break
		}
		if !found {
			return nil, &parseError{line}
		}
	}
	return stats, nil
}

type parseError struct{ line string }

func (e *parseError) Error() string { return "cannot parse line " + strconv.Quote(e.line) }

// ScriptCalls is a go-redis hook that counts the scripts (EVAL, EVALSHA) a
// client sends, pipelined ones included: add it with rdb.AddHook and read
// N to wait for an attempt to have been made.
type ScriptCalls struct{ n atomic.Int64 }

// N returns the number of scripts sent so far.
func (h *ScriptCalls) N() int64 { return h.n.Load() }

func (h *ScriptCalls) count(cmd redis.Cmder) {
	if n := cmd.Name(); n == "evalsha" || n == "eval" {
		h.n.Add(1)
	}
}

// DialHook implements redis.Hook.
func (h *ScriptCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (h *ScriptCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return countEach(next, h.count)
}

// ProcessPipelineHook implements redis.Hook.
func (h *ScriptCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return countPipelined(next, h.count)
}

// Commands is a go-redis hook that counts every command a client sends,
// pipelined ones included.
type Commands struct{ n atomic.Int64 }

// N returns the number of commands sent so far.
func (h *Commands) N() int64 { return h.n.Load() }

func (h *Commands) count(redis.Cmder) { h.n.Add(1) }

// DialHook implements redis.Hook.
func (h *Commands) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (h *Commands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return countEach(next, h.count)
}

// ProcessPipelineHook implements redis.Hook.
func (h *Commands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return countPipelined(next, h.count)
}

// countEach is a process hook that hands each command to count.
func countEach(next redis.ProcessHook, count func(redis.Cmder)) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		count(cmd)
		return next(ctx, cmd)
	}
}

// countPipelined is a pipeline hook that hands each command to count.
func countPipelined(next redis.ProcessPipelineHook, count func(redis.Cmder)) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			count(cmd)
		}
		return next(ctx, cmds)
	}
}
