package redistest

import (
	"context"
	"strconv"
	"strings"
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
