package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/rlock-go/rlock/internal/base"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// defaultRedisURL is where inspect and unlock connect without --redis or
// --cluster: the local default port, as redis-cli does.
const defaultRedisURL = "redis://127.0.0.1:6379"

// dialerRetries replaces go-redis' default of 5 dial attempts per
// connection: a command-line tool should say promptly that a server is down.
const dialerRetries = 2

// pingTimeout bounds the first PING to each server.
const pingTimeout = 5 * time.Second

// connFlags are the --redis and --cluster flags every command takes.
type connFlags struct {
	redisURL string
	cluster  string
}

// register adds the flags to fs; def says what an empty --redis means.
func (c *connFlags) register(fs *flag.FlagSet, def string) {
	fs.StringVar(&c.redisURL, "redis", "", "Redis URL, redis://[user:password@]host:port[/db] (default: "+def+")")
	fs.StringVar(&c.cluster, "cluster", "", "Redis Cluster seed addresses, host:port,host:port,... (instead of --redis)")
}

// target is a validated place to connect to.
type target struct {
	// where names it in messages: "Redis at host:port" or "Redis Cluster at ...".
	where string
	// newClient returns a new go-redis client for it; no I/O.
	newClient func() redis.UniversalClient
}

// resolve validates the flags. fallback is the URL used when neither flag is
// given; "" means the caller provides its own (the demo's embedded Redis)
// and resolve returns nil.
func (c *connFlags) resolve(fallback string) (*target, error) {
	switch {
	case c.redisURL != "" && c.cluster != "":
		return nil, usageError("give --redis or --cluster, not both")
	case c.cluster != "":
		addrs, err := parseAddrs("--cluster", c.cluster)
		if err != nil {
			return nil, err
		}
		return &target{
			where: "Redis Cluster at " + strings.Join(addrs, ","),
			newClient: func() redis.UniversalClient {
				return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, DialerRetries: dialerRetries})
			},
		}, nil
	}
	u := c.redisURL
	if u == "" {
		u = fallback
	}
	if u == "" {
		return nil, nil
	}
	opts, err := parseRedisURL(u)
	if err != nil {
		return nil, err
	}
	return &target{
		where:     "Redis at " + opts.Addr,
		newClient: func() redis.UniversalClient { return redis.NewClient(opts) },
	}, nil
}

// parseRedisURL parses a redis://, rediss:// or unix:// URL.
func parseRedisURL(u string) (*redis.Options, error) {
	pu, err := url.Parse(u)
	if err == nil && pu.Scheme != "unix" && pu.Hostname() == "" {
		// go-redis would quietly use localhost.
		return nil, usageError("--redis %q: no host (want redis://[user:password@]host:port[/db])", u)
	}
	opts, err := redis.ParseURL(u)
	if err != nil {
		return nil, usageError("--redis %q: %v (want redis://[user:password@]host:port[/db])", u, err)
	}
	if opts.Network != "unix" {
		if _, err := checkAddr(opts.Addr); err != nil {
			return nil, usageError("--redis %q: %v", u, err)
		}
	}
	opts.DialerRetries = dialerRetries
	return opts, nil
}

// parseAddrs parses a comma-separated list of host:port addresses.
func parseAddrs(flagName, list string) ([]string, error) {
	var addrs []string
	for a := range strings.SplitSeq(list, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if _, err := checkAddr(a); err != nil {
			return nil, usageError("%s: %v", flagName, err)
		}
		addrs = append(addrs, a)
	}
	if len(addrs) == 0 {
		return nil, usageError("%s: no addresses (want host:port,host:port,...)", flagName)
	}
	return addrs, nil
}

// checkAddr checks that a is host:port with a non-empty host and a port in
// 1..65535.
func checkAddr(a string) (string, error) {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return "", fmt.Errorf("bad address %q: want host:port", a)
	}
	if host == "" {
		return "", fmt.Errorf("bad address %q: no host", a)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return "", fmt.Errorf("bad address %q: port must be 1..65535", a)
	}
	return a, nil
}

// unreachableError is a failed first PING: exit status 3.
type unreachableError struct {
	where string
	err   error
}

func (e *unreachableError) Error() string        { return fmt.Sprintf("cannot reach %s: %v", e.where, e.err) }
func (e *unreachableError) Unwrap() error        { return e.err }
func (e *unreachableError) Is(target error) bool { return target == errUnreachable }

// ping checks that rdb answers, within pingTimeout.
func ping(ctx context.Context, rdb redis.UniversalClient, where string) error {
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &unreachableError{where, err}
	}
	return nil
}

// connect resolves the flags (fallback as in resolve), opens a client and
// pings it. The caller closes the client.
func (c *connFlags) connect(ctx context.Context, fallback string) (redis.UniversalClient, *target, error) {
	t, err := c.resolve(fallback)
	if err != nil {
		return nil, nil, err
	}
	rdb := t.newClient()
	if err := ping(ctx, rdb, t.where); err != nil {
		_ = rdb.Close()
		return nil, nil, err
	}
	return rdb, t, nil
}

// lockName validates a NAME argument.
func lockName(args []string) (string, error) {
	switch len(args) {
	case 0:
		return "", usageError("missing lock NAME")
	case 1:
	default:
		return "", usageError("one lock NAME expected, got %d arguments", len(args))
	}
	if err := base.ValidateName(args[0]); err != nil {
		return "", usageError("bad lock name: %v", err)
	}
	return args[0], nil
}

// newFlagSet returns the flag set of command name: errors go to e.stderr,
// and -h prints help followed by the flags.
func newFlagSet(name, help string, e env) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprint(e.stderr, help)
		fs.PrintDefaults()
	}
	return fs
}
