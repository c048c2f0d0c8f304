package redistest

import (
	"bufio"
	"context"
	"net"
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

// ScriptRun is one script call a server ran, as MONITOR showed it: the
// SHA1 of the script (EVALSHA; "" for EVAL) and the commands the script
// called, in order, upper-cased ("HGET", "PTTL", ...).
type ScriptRun struct {
	SHA      string
	Commands []string
}

// Monitored is what the server at one address ran while Monitor watched:
// every script call with the commands inside it, and how many times each
// other command (upper-cased) came from a client.
type Monitored struct {
	Scripts []ScriptRun
	Others  map[string]int
}

// Monitor sends MONITOR to the real server at addr on a connection of its
// own and returns a function that stops watching and returns what the
// server ran meanwhile. Redis 7 shows a script call before the commands it
// runs, which it marks "[<db> lua]". Real Redis only; stop must be called
// (the connection is closed in t.Cleanup too).
func Monitor(t testing.TB, addr string) (stop func() Monitored) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("redistest: MONITOR: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	r := bufio.NewReaderSize(conn, 1<<16)
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatalf("redistest: MONITOR: %v", err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "+OK\r\n" {
		t.Fatalf("redistest: MONITOR: %q, %v", line, err)
	}
	got := make(chan Monitored, 1)
	go func() {
		m := Monitored{Others: map[string]int{}}
		var cur *ScriptRun
		defer func() {
			if cur != nil {
				m.Scripts = append(m.Scripts, *cur)
			}
			got <- m
		}()
		for {
			line, err := r.ReadString('\n')
			if err != nil || strings.Contains(line, monitorEnd) {
				return
			}
			src, args, ok := strings.Cut(line, "] ")
			fields := strings.Fields(args)
			if !ok || len(fields) == 0 {
				continue
			}
			cmd := strings.ToUpper(strings.Trim(fields[0], `"`))
			if strings.HasSuffix(src, " lua") {
				if cur != nil {
					cur.Commands = append(cur.Commands, cmd)
				}
				continue
			}
			if cur != nil {
				m.Scripts = append(m.Scripts, *cur)
				cur = nil
			}
			switch {
			case cmd == "EVALSHA" && len(fields) > 1:
				cur = &ScriptRun{SHA: strings.Trim(fields[1], `"`)}
			case cmd == "EVAL":
				cur = &ScriptRun{}
			default:
				m.Others[cmd]++
			}
		}
	}()
	return func() Monitored {
		// An ECHO through the monitored server marks the end: every
		// command the server ran before it has been shown once it shows.
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if err := c.Echo(ctx, monitorEnd).Err(); err != nil {
			t.Errorf("redistest: MONITOR: ending: %v", err)
		}
		m := <-got
		_ = conn.Close()
		return m
	}
}

// monitorEnd is the text Monitor's stop echoes to mark the end.
const monitorEnd = "redistest:monitor:end"
