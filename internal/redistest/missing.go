package redistest

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
)

// noticed holds, per message, the once that prints the missing-binary
// notice: one line per test binary, that is per package.
var noticed sync.Map // message -> *sync.Once

// Where notice writes; replaced in tests.
var (
	noticeStderr io.Writer = os.Stderr
	// noticeToTTY reports whether the notice should also go to the
	// terminal: without -v, when stderr is not one (go test buffers it).
	noticeToTTY = func() bool { return !testing.Verbose() && !isCharDevice(os.Stderr) }
	openTTY     = func() (io.WriteCloser, error) { return os.OpenFile("/dev/tty", os.O_WRONLY, 0) }
)

// missing skips t because a binary the test needs is not installed (msg
// says which), after saying so once per test binary (see notice); with
// RequireEnv set it fails t instead.
func missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv(RequireEnv) != "" {
		t.Fatalf("redistest: %s is set but %s", RequireEnv, msg)
	}
	once, _ := noticed.LoadOrStore(msg, new(sync.Once))
	once.(*sync.Once).Do(func() { notice(msg) })
	t.Skip(msg)
}

// notice prints the line that says real-server tests are skipped. t.Skip's
// reason shows only under -v, and "go test ./..." shows nothing of a
// passing package's output, stderr included; so without -v, when stderr is
// not a terminal, the line also goes to the controlling terminal, if there
// is one. In CI, which has none, RequireEnv is the way to notice.
func notice(msg string) {
	line := fmt.Sprintf("%s: %s; skipping them (%s=1 makes this a failure)\n", testPackage(), msg, RequireEnv)
	_, _ = io.WriteString(noticeStderr, line)
	if !noticeToTTY() {
		return
	}
	tty, err := openTTY()
	if err != nil {
		return
	}
	defer tty.Close()
	_, _ = io.WriteString(tty, line)
}

// testPackage names the package under test: the test binary's main
// package path without ".test".
func testPackage() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Path != "" {
		return strings.TrimSuffix(bi.Path, ".test")
	}
	return strings.TrimSuffix(filepath.Base(os.Args[0]), ".test")
}

func isCharDevice(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
