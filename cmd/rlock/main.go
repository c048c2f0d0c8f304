// Command rlock demonstrates and operates rlock distributed locks.
//
// Usage:
//
//	rlock demo [flags]                       the flash-sale demo (embedded Redis by default)
//	rlock inspect [flags] NAME               show who holds lock NAME, its TTL, token, queue, waiters
//	rlock unlock --force [--yes] [flags] NAME  delete lock NAME whoever holds it
//	rlock version                            print rlock's version, Go version and platform
//	rlock help [COMMAND]                     print this help, or COMMAND's help and flags
//
// inspect and unlock connect to --redis (default redis://127.0.0.1:6379) or
// to the Redis Cluster given by --cluster. Every command also takes --user
// and --password (default $REDISCLI_AUTH), which --cluster needs for
// authentication and which may replace a --redis URL's, --tls (implied by a
// rediss:// URL) and --connect-timeout (default 5s: the limit on
// connecting to each server and on its first PING). Flags may follow NAME.
//
// Exit status:
//
//	0  success (also: inspect or unlock of a name with no key and no waiter,
//	   shown as "no such lock"; nothing to unlock; --watch ended by Ctrl-C)
//	1  failure: a locked demo run oversold or failed, a Redis error, a key
//	   that is not a lock, a declined confirmation
//	2  bad usage: command, flag, argument, URL, address or lock name; unlock
//	   without --force, or without --yes when stdin is not a terminal
//	3  Redis unreachable: a server did not answer the first PING within
//	   --connect-timeout (no connection, or no answer)
//	4  Redis refused the connection: a server answered with an error, such
//	   as a missing or wrong password, a database number beyond its
//	   'databases' setting (redis://host:port/99), or a --cluster seed that
//	   is not a cluster node
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
)

const usage = `rlock: distributed locks on Redis, Redisson-compatible.

Usage:
  rlock demo [flags]        the flash-sale demo: one item, limited stock, many
                            workers ordering at once, run without a lock and
                            with each lock kind; on an embedded Redis unless
                            --redis or --cluster is given
  rlock inspect [flags] NAME
                            who holds lock NAME (owner fields, hold counts),
                            its TTL, fencing token, fair queue and waiters;
                            --watch refreshes every second, --json for scripts
  rlock unlock --force [--yes] [flags] NAME
                            delete lock NAME whoever holds it (asks first)
  rlock version             rlock's version ("(devel)" from a checkout), the
                            Go version and the platform
  rlock help [COMMAND]      this help, or COMMAND's help and flags

inspect and unlock use --redis URL (default redis://127.0.0.1:6379) or
--cluster host:port,...; flags may come before or after NAME. Every command
also takes --user and --password (default $REDISCLI_AUTH) for --cluster or
instead of the URL's, --tls (a rediss:// URL implies it) and
--connect-timeout (default 5s).
Run 'rlock help COMMAND' or 'rlock COMMAND -h' for a command's flags.

Exit status:
  0  success (also: inspect or unlock of a name with no key and no waiter,
     shown as "no such lock"; nothing to unlock; --watch ended by Ctrl-C)
  1  failure: a locked demo run oversold or failed, a Redis error, a key that
     is not a lock, a declined confirmation
  2  bad usage: command, flag, argument, URL, address or lock name; unlock
     without --force, or without --yes when stdin is not a terminal
  3  Redis unreachable: a server did not answer the first PING within
     --connect-timeout (no connection, or no answer)
  4  Redis refused the connection: a server answered with an error, such as
     a missing or wrong password, a database number beyond its 'databases'
     setting (redis://host:port/99), or a --cluster seed that is not a
     cluster node
`

// Exit statuses.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitUnreachable = 3
	exitRefused     = 4
)

func main() {
	// rlock reports errors itself; go-redis would also log each failed
	// dial to stderr.
	redis.SetLogger(quiet{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], stdio()))
}

// quiet is a go-redis logger that drops everything.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// env is the command's view of its process: arguments aside, everything
// run needs, so tests can run it in-process with a fake terminal.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// stdinTTY, stdoutTTY and stderrTTY report whether the streams are
	// terminals: the confirmation prompt needs one on stdin, the progress
	// bar on stderr, and inspect --watch redraws the screen on stdout.
	stdinTTY, stdoutTTY, stderrTTY bool
}

func stdio() env {
	return env{
		stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr,
		stdinTTY: isTerminal(os.Stdin), stdoutTTY: isTerminal(os.Stdout), stderrTTY: isTerminal(os.Stderr),
	}
}

var (
	// errUsage marks errors caused by the command line (exit status 2).
	errUsage = errors.New("usage")
	// errUnreachable marks a Redis server that did not answer the first
	// PING (exit status 3).
	errUnreachable = errors.New("unreachable")
	// errRefused marks a Redis server that answered the connection's setup
	// or first PING with an error (exit status 4).
	errRefused = errors.New("refused")
)

func run(ctx context.Context, args []string, e env) int {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, usage)
		return exitUsage
	}
	var err error
	switch cmd, ok := commands[args[0]]; {
	case ok:
		err = cmd(ctx, args[1:], e)
	case args[0] == "help" || args[0] == "-h" || args[0] == "-help" || args[0] == "--help":
		return help(ctx, args[1:], e)
	case args[0] == "version" || args[0] == "--version":
		return version(args[1:], e)
	default:
		fmt.Fprintf(e.stderr, "rlock: unknown command %q (see 'rlock --help')\n", args[0])
		return exitUsage
	}
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errUsage):
		msg := strings.TrimPrefix(err.Error(), errUsage.Error()+": ")
		fmt.Fprintf(e.stderr, "rlock %s: %s (see 'rlock %s --help')\n", args[0], msg, args[0])
		return exitUsage
	case errors.Is(err, errUnreachable):
		fmt.Fprintf(e.stderr, "rlock %s: %v\n", args[0], err)
		return exitUnreachable
	case errors.Is(err, errRefused):
		fmt.Fprintf(e.stderr, "rlock %s: %v\n", args[0], err)
		return exitRefused
	default:
		fmt.Fprintf(e.stderr, "rlock %s: %v\n", args[0], err)
		return exitFailure
	}
}

// commands are the commands that take flags, by name.
var commands = map[string]func(context.Context, []string, env) error{
	"demo":    demo,
	"inspect": inspectCmd,
	"unlock":  unlockCmd,
}

// help prints the general help, or with one argument that command's help
// and flags, on stdout.
func help(ctx context.Context, args []string, e env) int {
	switch {
	case len(args) == 0 || args[0] == "help":
		fmt.Fprint(e.stdout, usage)
		return exitOK
	case len(args) > 1:
		fmt.Fprintf(e.stderr, "rlock help: one command expected, got %d arguments\n", len(args))
		return exitUsage
	case args[0] == "version":
		fmt.Fprint(e.stdout, versionHelp)
		return exitOK
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(e.stderr, "rlock help: unknown command %q (commands: demo, inspect, unlock, version, help)\n", args[0])
		return exitUsage
	}
	// A command given -h prints its help and flags on its stderr and
	// returns flag.ErrHelp before doing anything else.
	out := env{stdin: e.stdin, stdout: e.stdout, stderr: e.stdout}
	if err := cmd(ctx, []string{"-h"}, out); !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(e.stderr, "rlock help %s: %v\n", args[0], err)
		return exitFailure
	}
	return exitOK
}

const versionHelp = `Usage: rlock version

Prints the version of rlock's module ("(devel)" when built without version
information), the commit it was built from when known, the Go version and
the platform.
`

// readBuildInfo is debug.ReadBuildInfo, replaced in tests.
var readBuildInfo = debug.ReadBuildInfo

// version prints "rlock VERSION [(commit REV[, modified])] GOVERSION OS/ARCH".
func version(args []string, e env) int {
	if len(args) > 0 {
		if args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
			fmt.Fprint(e.stdout, versionHelp)
			return exitOK
		}
		fmt.Fprintf(e.stderr, "rlock version: unexpected argument %q\n", args[0])
		return exitUsage
	}
	fmt.Fprintln(e.stdout, versionLine())
	return exitOK
}

func versionLine() string {
	v, commit, goVersion := "(devel)", "", runtime.Version()
	if bi, ok := readBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
		var rev, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if rev != "" {
			commit = " (commit " + rev[:min(len(rev), 12)]
			if modified == "true" {
				commit += ", modified"
			}
			commit += ")"
		}
	}
	return fmt.Sprintf("rlock %s%s %s %s/%s", v, commit, goVersion, runtime.GOOS, runtime.GOARCH)
}

// usageError returns an error that makes run exit with status 2.
func usageError(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, a...))
}

// parse parses args with fs, allowing flags after positional arguments (as
// in "rlock inspect NAME --json"); everything after "--" is positional.
//
// A bad flag is a usage error of one line (run adds the pointer to
// --help), not the flag package's message followed by the whole help; -h
// prints the help (fs.Usage) and returns flag.ErrHelp.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	help, out := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	defer func() { fs.Usage = help; fs.SetOutput(out) }()
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(out)
				help()
				return nil, err
			}
			return nil, fmt.Errorf("%w: %s", errUsage, flagMessage(fs, err))
		}
		rest := fs.Args()
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// notBoolValue matches the flag package's message for a bad value of a
// flag that may be given bare (IsBoolFlag), such as --progress.
var notBoolValue = regexp.MustCompile(`^invalid boolean value ("[^"]*") for -(\S+): (.*)$`)

// flagMessage is the flag package's error message, except that a flag that
// may be given bare but takes words (--progress=bar) is not called boolean.
func flagMessage(fs *flag.FlagSet, err error) string {
	m := notBoolValue.FindStringSubmatch(err.Error())
	if m == nil {
		return err.Error()
	}
	if f := fs.Lookup(m[2]); f != nil && fmt.Sprintf("%T", f.Value) == "*flag.boolValue" {
		return err.Error()
	}
	return fmt.Sprintf("invalid value %s for --%s: %s", m[1], m[2], m[3])
}
