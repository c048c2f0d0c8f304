package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock/internal/base"
)

// defaultRedisURL is where inspect and unlock connect without --redis or
// --cluster: the local default port, as redis-cli does.
const defaultRedisURL = "redis://127.0.0.1:6379"

// dialerRetries replaces go-redis' default of 5 dial attempts per
// connection: a command-line tool should say promptly that a server is down.
const dialerRetries = 2

// defaultConnectTimeout is the default of --connect-timeout.
const defaultConnectTimeout = 5 * time.Second

// passwordEnv is read for a password when neither --password nor the URL
// gives one, as redis-cli does: a password in the environment is not shown
// in the process list.
const passwordEnv = "REDISCLI_AUTH"

// connFlags are the connection flags every command takes.
type connFlags struct {
	redisURL string
	cluster  string
	user     string
	password string
	tls      bool
	timeout  time.Duration
}

// register adds the flags to fs; def says what an empty --redis means.
func (c *connFlags) register(fs *flag.FlagSet, def string) {
	fs.StringVar(&c.redisURL, "redis", "", "Redis URL, redis://[user:password@]host:port[/db] or rediss://... for TLS (default: "+def+")")
	fs.StringVar(&c.cluster, "cluster", "", "Redis Cluster seed addresses, host:port,host:port,... (instead of --redis)")
	fs.StringVar(&c.user, "user", "", "ACL user to authenticate as (with --cluster, or instead of the --redis URL's user)")
	fs.StringVar(&c.password, "password", "", "password to authenticate with (with --cluster, or instead of the --redis URL's); default $"+passwordEnv+", which other users cannot see in the process list")
	fs.BoolVar(&c.tls, "tls", false, "connect with TLS, verifying the server's certificate against the system's roots (a rediss:// URL implies it)")
	fs.DurationVar(&c.timeout, "connect-timeout", defaultConnectTimeout, "limit on connecting to each server and on its first PING")
}

// target is a validated place to connect to.
type target struct {
	// where names it in messages: "Redis at host:port" or "Redis Cluster at ...".
	where string
	// newClient returns a new go-redis client for it; no I/O.
	newClient func() redis.UniversalClient
	// timeout bounds the first PING (--connect-timeout).
	timeout time.Duration
	// bare, set when a password but no user was given, returns a client
	// for the same place without credentials: if the server answers it,
	// the password was not needed (a Redis whose default user has no
	// password accepts any AUTH), and ping sets warning.
	bare func() redis.UniversalClient
	// warning, set by ping, is for the command to print on stderr.
	warning string
}

// resolve validates the flags. fallback is the URL used when neither flag is
// given; "" means the caller provides its own (the demo's embedded Redis)
// and resolve returns nil.
func (c *connFlags) resolve(fallback string) (*target, error) {
	if c.timeout <= 0 {
		return nil, usageError("--connect-timeout must be positive")
	}
	switch {
	case c.redisURL != "" && c.cluster != "":
		return nil, usageError("give --redis or --cluster, not both")
	case c.cluster != "":
		addrs, err := parseAddrs("--cluster", c.cluster)
		if err != nil {
			return nil, err
		}
		opts := &redis.ClusterOptions{Addrs: addrs, DialerRetries: dialerRetries, DialTimeout: c.timeout,
			Username: c.user, Password: c.secret(), TLSConfig: c.tlsConfig("")}
		t := &target{
			where:     "Redis Cluster at " + strings.Join(addrs, ","),
			newClient: func() redis.UniversalClient { return redis.NewClusterClient(opts) },
			timeout:   c.timeout,
		}
		if opts.Password != "" && opts.Username == "" {
			bare := *opts
			bare.Password = ""
			t.bare = func() redis.UniversalClient { return redis.NewClusterClient(&bare) }
		}
		return t, nil
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
	if err := c.apply(opts); err != nil {
		return nil, err
	}
	return withBare(&target{
		where:     "Redis at " + opts.Addr,
		newClient: func() redis.UniversalClient { return redis.NewClient(opts) },
		timeout:   c.timeout,
	}, opts), nil
}

// withBare sets t.bare when opts carry a password but no user.
func withBare(t *target, opts *redis.Options) *target {
	if opts.Password != "" && opts.Username == "" {
		bare := *opts
		bare.Password = ""
		t.bare = func() redis.UniversalClient { return redis.NewClient(&bare) }
	}
	return t
}

// node returns the target of one server at addr, such as a RedLock node,
// with the flags' credentials, TLS and timeout.
func (c *connFlags) node(where, addr string) *target {
	opts := &redis.Options{Addr: addr, DialerRetries: dialerRetries, DialTimeout: c.timeout,
		Username: c.user, Password: c.secret(), TLSConfig: c.tlsConfig("")}
	return withBare(&target{where: where, newClient: func() redis.UniversalClient { return redis.NewClient(opts) }, timeout: c.timeout}, opts)
}

// apply adds the flags' credentials, TLS and timeout to the options of a
// --redis URL. A credential given both ways is a usage error.
func (c *connFlags) apply(opts *redis.Options) error {
	if c.user != "" {
		if opts.Username != "" {
			return usageError("--user and a user in the --redis URL: give one")
		}
		opts.Username = c.user
	}
	if c.password != "" && opts.Password != "" {
		return usageError("--password and a password in the --redis URL: give one")
	}
	if opts.Password == "" {
		opts.Password = c.secret()
	}
	if c.tls && opts.TLSConfig == nil {
		if opts.Network == "unix" {
			return usageError("--tls: not for a unix:// socket")
		}
		host, _, _ := net.SplitHostPort(opts.Addr)
		opts.TLSConfig = c.tlsConfig(host)
	}
	opts.DialTimeout = c.timeout
	return nil
}

// secret is --password, or else $REDISCLI_AUTH.
func (c *connFlags) secret() string {
	if c.password != "" {
		return c.password
	}
	return os.Getenv(passwordEnv)
}

// tlsConfig is the TLS configuration --tls asks for, nil without it. An
// empty serverName makes crypto/tls verify each address's own host name.
func (c *connFlags) tlsConfig(serverName string) *tls.Config {
	if !c.tls {
		return nil
	}
	return &tls.Config{ServerName: serverName, MinVersion: tls.VersionTLS12}
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
	if opts.DB < 0 {
		// go-redis would quietly use database 0.
		return nil, usageError("--redis %q: database %d: want a number from 0", u, opts.DB)
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
	where   string
	timeout time.Duration
	err     error
}

func (e *unreachableError) Error() string {
	if errors.Is(e.err, context.DeadlineExceeded) || isTimeout(e.err) {
		return fmt.Sprintf("cannot reach %s: no answer within %v (--connect-timeout): %v", e.where, e.timeout, e.err)
	}
	return fmt.Sprintf("cannot reach %s: %v", e.where, e.err)
}
func (e *unreachableError) Unwrap() error        { return e.err }
func (e *unreachableError) Is(target error) bool { return target == errUnreachable }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// refusedError is a server that answered the connection's setup or first
// PING with an error (wrong password, database out of range, a server
// that is not a cluster node...): exit status 4.
type refusedError struct {
	where string
	err   error
}

func (e *refusedError) Error() string {
	msg := fmt.Sprintf("%s refused the connection: %v", e.where, e.err)
	switch {
	case strings.Contains(e.err.Error(), "DB index is out of range"):
		msg += " (the database number in the --redis URL is beyond the server's 'databases' setting, 16 by default)"
	case redis.HasErrorPrefix(e.err, "NOAUTH"), redis.HasErrorPrefix(e.err, "WRONGPASS"):
		msg += " (give --password and maybe --user, or put them in the --redis URL)"
	}
	return msg
}
func (e *refusedError) Unwrap() error        { return e.err }
func (e *refusedError) Is(target error) bool { return target == errRefused }

// ping checks that rdb answers, within t.timeout. An error reply from the
// server is a refusal; anything else, such as a failed dial or a timeout,
// makes it unreachable.
func (t *target) ping(ctx context.Context, rdb redis.UniversalClient) error {
	timeout := t.timeout
	if timeout <= 0 {
		timeout = defaultConnectTimeout
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// go-redis applies its own ReadTimeout (3 s, times its retries) to a
	// connection's setup and to the PING, not pctx's deadline: wait for
	// pctx, not for go-redis. The caller's Close of rdb ends the PING.
	done := make(chan error, 1)
	go func() { done <- rdb.Ping(pctx).Err() }()
	var err error
	select {
	case err = <-done:
	case <-pctx.Done():
		err = pctx.Err()
	}
	var reply redis.Error
	switch {
	case err == nil:
		t.checkPasswordNeeded(ctx)
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.As(err, &reply) && !errors.Is(err, redis.ErrClosed):
		return &refusedError{t.where, err}
	}
	return &unreachableError{t.where, timeout, err}
}

// checkPasswordNeeded sets t.warning when a password was given and the
// server also answers a connection without one: it does not check
// passwords (a default user without one accepts any AUTH), so the password
// protects nothing and may be meant for another server.
func (t *target) checkPasswordNeeded(ctx context.Context) {
	if t.bare == nil {
		return
	}
	rdb := t.bare()
	defer rdb.Close()
	pctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- rdb.Ping(pctx).Err() }()
	select {
	case err := <-done:
		if err == nil {
			t.warning = fmt.Sprintf("a password was given, but %s does not require one: it accepts connections without a password and does not check it", t.where)
		}
	case <-pctx.Done():
	}
}

// warn prints t's warning, if any, for command cmd.
func (t *target) warn(e env, cmd string) {
	if t != nil && t.warning != "" {
		fmt.Fprintf(e.stderr, "rlock %s: warning: %s\n", cmd, t.warning)
	}
}

// connect resolves the flags (fallback as in resolve), opens a client and
// pings it. The caller closes the client.
func (c *connFlags) connect(ctx context.Context, fallback string) (redis.UniversalClient, *target, error) {
	t, err := c.resolve(fallback)
	if err != nil {
		return nil, nil, err
	}
	rdb := t.newClient()
	if err := t.ping(ctx, rdb); err != nil {
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
