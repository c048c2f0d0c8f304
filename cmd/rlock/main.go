// Command rlock demonstrates and operates rlock distributed locks.
//
// Usage:
//
//	rlock demo [flags]     run the flash-sale demo (embedded Redis by default)
//	rlock help             print this help
//
// Exit status: 0 on success, 1 when a locked run oversold stock or a run
// failed, 2 for bad usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
)

const usage = `rlock: distributed locks on Redis, Redisson-compatible.

Usage:
  rlock demo [flags]   the flash-sale demo: one item, limited stock, many
                       workers ordering at once, run without a lock and with
                       one; on an embedded Redis unless --redis is given
  rlock help           this help

Run 'rlock demo -h' for the demo's flags.

Exit status: 0 success; 1 a locked run oversold or a run failed; 2 bad usage.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// errUsage marks errors caused by the command line.
var errUsage = errors.New("usage")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "demo":
		err = demo(ctx, args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "rlock: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "rlock: %v\n", err)
		return 2
	default:
		fmt.Fprintf(stderr, "rlock: %v\n", err)
		return 1
	}
}
