package redistest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// HelperEnv is the environment variable that marks a process started by
// StartHelperProcess; its value there is "1".
const HelperEnv = "RLOCK_HELPER_PROCESS"

// IsHelperProcess reports whether this process is a child started by
// StartHelperProcess. A helper test starts with
//
//	if !redistest.IsHelperProcess() {
//		t.Skip("helper process for TestX")
//	}
func IsHelperProcess() bool {
	return os.Getenv(HelperEnv) == "1"
}

// Child is a copy of the test binary started by StartHelperProcess to run one
// test, typically one that takes a lock and then gets killed. Its methods
// are safe for concurrent use.
type Child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	err   *lockedBuffer // the child's stderr
	done  chan struct{} // closed once the child has exited and been reaped

	mu       sync.Mutex
	lines    []string      // stdout lines read so far
	next     int           // first line not consumed by WaitLine
	changed  chan struct{} // closed and replaced whenever lines or exited change
	exited   bool
	waitErr  error // cmd.Wait's result once exited
	killSent bool
}

// StartHelperProcess runs the current test binary again, restricted to the
// test testName (a top-level test, or "TestX/sub" for a subtest), with
// RLOCK_HELPER_PROCESS=1 and env ("KEY=value") added to this process's
// environment. The child's stdout is read line by line for WaitLine; its
// stdin is a pipe that stays open until Kill, so a child may block reading
// it. The child is killed in t.Cleanup if still running.
func StartHelperProcess(t testing.TB, testName string, env ...string) *Child {
	t.Helper()
	cmd := exec.Command(os.Args[0],
		"-test.run="+anchoredRunPattern(testName),
		"-test.count=1",
		"-test.v=true",
	)
	cmd.Env = append(append(os.Environ(), env...), HelperEnv+"=1")
	cmd.SysProcAttr = childProcAttr()
	c := &Child{
		cmd:     cmd,
		err:     &lockedBuffer{},
		done:    make(chan struct{}),
		changed: make(chan struct{}),
	}
	cmd.Stderr = c.err
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("redistest: helper process stdout: %v", err)
	}
	c.stdin, err = cmd.StdinPipe()
	if err != nil {
		t.Fatalf("redistest: helper process stdin: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("redistest: starting helper process %s: %v", testName, err)
	}
	go c.read(stdout)
	t.Cleanup(c.Kill)
	return c
}

// PID returns the child's process id.
func (c *Child) PID() int {
	return c.cmd.Process.Pid
}

// WaitLine blocks until the child prints a line equal to want (without its
// newline), and consumes the lines up to and including it, so that waiting
// twice for the same text waits for two such lines. It fails t if timeout
// passes or the child exits first.
func (c *Child) WaitLine(t testing.TB, want string, timeout time.Duration) {
	t.Helper()
	if err := c.waitLine(want, timeout); err != nil {
		t.Fatalf("redistest: %v", err)
	}
}

// Kill sends SIGKILL to the child, unless it has already exited, and waits
// for it to be reaped.
func (c *Child) Kill() {
	c.mu.Lock()
	if !c.exited && !c.killSent {
		c.killSent = true
		_ = c.cmd.Process.Kill()
	}
	c.mu.Unlock()
	_ = c.stdin.Close()
	<-c.done
}

// Exited reports whether the child has exited, and with what result of
// exec.Cmd.Wait.
func (c *Child) Exited() (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.exited, c.waitErr
}

func (c *Child) waitLine(want string, timeout time.Duration) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		c.mu.Lock()
		for i := c.next; i < len(c.lines); i++ {
			if c.lines[i] == want {
				c.next = i + 1
				c.mu.Unlock()
				return nil
			}
		}
		if c.exited {
			err := fmt.Errorf("helper process exited (%v) before printing %q\n%s", c.waitErr, want, c.outputLocked())
			c.mu.Unlock()
			return err
		}
		changed := c.changed
		c.mu.Unlock()

		select {
		case <-changed:
		case <-timer.C:
			c.mu.Lock()
			err := fmt.Errorf("helper process did not print %q within %v\n%s", want, timeout, c.outputLocked())
			c.mu.Unlock()
			return err
		}
	}
}

// read collects stdout lines until EOF, then reaps the child.
func (c *Child) read(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		c.mu.Lock()
		c.lines = append(c.lines, sc.Text())
		c.notifyLocked()
		c.mu.Unlock()
	}
	// A line over 1 MiB stops the scanner; keep draining so the child never
	// blocks on a full pipe, as Wait must only run after the last read.
	_, _ = io.Copy(io.Discard, stdout)
	err := c.cmd.Wait()
	c.mu.Lock()
	c.exited = true
	c.waitErr = err
	c.notifyLocked()
	c.mu.Unlock()
	close(c.done)
}

func (c *Child) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *Child) outputLocked() string {
	var b strings.Builder
	b.WriteString("--- helper stdout:\n")
	for _, l := range c.lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	b.WriteString("--- helper stderr:\n")
	b.WriteString(c.err.String())
	return b.String()
}

// anchoredRunPattern turns "TestX/sub" into the -test.run pattern
// "^TestX$/^sub$", which selects exactly that test.
func anchoredRunPattern(testName string) string {
	parts := strings.Split(testName, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// lockedBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
