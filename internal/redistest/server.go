package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RequireEnv, when set (CI sets it), turns a missing redis-server into a
// test failure instead of a skip.
const RequireEnv = "RLOCK_REQUIRE_REDIS"

// SkipMessage is the reason given to t.Skip when redis-server is not
// installed.
const SkipMessage = "redis-server not found on PATH: install it (apt-get install redis-server) to run the real-Redis tests"

const (
	// readyTimeout bounds the wait for a freshly started redis-server.
	readyTimeout = 5 * time.Second
	// stopTimeout is how long a SIGTERMed redis-server gets before SIGKILL.
	stopTimeout = 5 * time.Second
	// startAttempts is how many ports StartServer tries when a port that
	// looked free was taken before redis-server could bind it.
	startAttempts = 5
	// restartAttempts is how many times Restart retries binding its port.
	restartAttempts = 10
)

// errBind marks a start that failed because the port was already in use.
var errBind = errors.New("redis-server could not bind its port")

// Server is a redis-server process started by StartServer, listening on
// 127.0.0.1 with persistence disabled. It is stopped in the t.Cleanup of the
// test that started it. Its methods are safe for concurrent use.
type Server struct {
	bin     string
	port    int
	dir     string
	logPath string
	outPath string
	extra   []string
	conf    string // config file given as the first argument, if any (sentinel)
	ready   string // the log line that says the server is ready, if not the default

	mu   sync.Mutex
	proc *serverProc  // the running process; nil after Kill or before start
	hold net.Listener // after Kill: keeps the port (see holdPort)
}

// serverProc is one redis-server process of a Server.
type serverProc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd.Wait has returned
	err  error         // cmd.Wait's result, readable after done is closed
}

// StartServer starts a redis-server on a free loopback port and waits until
// it answers PING. It skips the test (see SkipMessage) when redis-server is
// not on PATH, saying so once per test binary even without -v, or fails it
// when RequireEnv is set. extraArgs are appended to the command line, e.g.
// "--maxmemory", "10mb". The server runs in its own t.TempDir and is stopped
// (SIGCONT, SIGTERM, SIGKILL after a timeout) in t.Cleanup.
func StartServer(t testing.TB, extraArgs ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		missing(t, SkipMessage)
	}
	dir := t.TempDir()
	s := &Server{
		bin:     bin,
		dir:     dir,
		logPath: filepath.Join(dir, "redis.log"),
		outPath: filepath.Join(dir, "redis.out"),
		extra:   append([]string(nil), extraArgs...),
	}
	t.Cleanup(s.stop)

	var lastErr error
	for range startAttempts {
		port, err := freePort()
		if err != nil {
			t.Fatalf("redistest: no free port for redis-server: %v", err)
		}
		s.port = port
		lastErr = s.start()
		if lastErr == nil {
			return s
		}
		if !errors.Is(lastErr, errBind) {
			break
		}
	}
	t.Logf("redistest: redis-server output:\n%s", s.diagnostics())
	t.Fatalf("redistest: starting redis-server failed: %v", lastErr)
	return nil
}

// Addr returns the server's address, "127.0.0.1:PORT". It stays the same
// across Restart.
func (s *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// PID returns the process id of the running redis-server, or 0 when it has
// been killed and not restarted.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// Kill sends SIGKILL to the server and waits for the process to be gone. The
// data it held is lost. It does nothing when the server is not running.
// Until Restart, the port stays taken by a listener that closes every
// connection it accepts, so that a server another test starts cannot take
// the port and answer for the killed one.
func (s *Server) Kill() {
	p := s.take()
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	s.holdPort()
}

// holdPort keeps the killed server's port with a listener that closes every
// connection at once, as far as the port can be had (best effort).
func (s *Server) holdPort() {
	ln, err := net.Listen("tcp", s.Addr())
	if err != nil {
		return
	}
	s.mu.Lock()
	s.hold = ln
	s.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
}

// releasePort gives up a port kept by holdPort.
func (s *Server) releasePort() {
	s.mu.Lock()
	ln := s.hold
	s.hold = nil
	s.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
	}
}

// Restart starts a new redis-server process on the same port, with the same
// arguments, after killing the current one if it still runs. The new process
// starts empty, as persistence is disabled. It fails t if the server does not
// come up.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Kill()
	s.releasePort()
	var err error
	backoff := 10 * time.Millisecond
	for range restartAttempts {
		err = s.start()
		if err == nil || !errors.Is(err, errBind) {
			break
		}
		// The port may be held for a moment by a socket of the old process
		// still being torn down.
		time.Sleep(backoff)
		backoff = min(2*backoff, 200*time.Millisecond)
	}
	if err != nil {
		t.Logf("redistest: redis-server output:\n%s", s.diagnostics())
		t.Fatalf("redistest: restarting redis-server on %s failed: %v", s.Addr(), err)
	}
}

// Freeze stops the server process with SIGSTOP: connections stay open but
// nothing is answered until Thaw. The cleanup thaws a frozen server before
// stopping it.
func (s *Server) Freeze() {
	s.signal(syscall.SIGSTOP)
}

// Thaw resumes a server stopped by Freeze with SIGCONT.
func (s *Server) Thaw() {
	s.signal(syscall.SIGCONT)
}

// NewClient returns a go-redis client for this server, closed in t.Cleanup.
// The options start as go-redis defaults with Addr set; opts may change any
// of them, including Addr (to go through a Proxy, for example).
func (s *Server) NewClient(t testing.TB, opts ...func(*redis.Options)) *redis.Client {
	t.Helper()
	return newClient(t, s.Addr(), opts)
}

// LogPath returns the path of the server's log file.
func (s *Server) LogPath() string {
	return s.logPath
}

func (s *Server) signal(sig os.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		_ = s.proc.cmd.Process.Signal(sig)
	}
}

// take detaches the current process from s and returns it.
func (s *Server) take() *serverProc {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.proc
	s.proc = nil
	return p
}

// stop is the cleanup: it ends the current process gracefully if possible.
func (s *Server) stop() {
	defer s.releasePort()
	p := s.take()
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}

// start launches a redis-server on s.port and waits until it is ready. On
// failure the process is gone when start returns.
func (s *Server) start() error {
	args := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--enable-debug-command", "local",
		"--dir", s.dir,
		"--logfile", s.logPath,
	}
	args = append(args, s.extra...)
	if s.conf != "" {
		args = append([]string{s.conf}, args...)
	}

	// Config errors go to stderr, not to the log file: keep them in a file
	// (a file, not a pipe, so that no copying goroutine is needed).
	out, err := os.OpenFile(s.outPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.dir
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = childProcAttr()
	err = cmd.Start()
	_ = out.Close() // the child has its own descriptor
	if err != nil {
		return err
	}
	p := &serverProc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()

	if err := s.waitReady(p); err != nil {
		if s.take() == p {
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
		}
		<-p.done
		return err
	}
	return nil
}

// waitReady polls until the process p reports that it accepts connections
// and then answers PING on s.port as itself (checked through INFO's
// process_id). Nothing connects to the port before p's own log says it
// bound it, so a server of someone else that happens to hold the port is
// never touched.
func (s *Server) waitReady(p *serverProc) error {
	deadline := time.Now().Add(readyTimeout)
	backoff := 2 * time.Millisecond
	pid := p.cmd.Process.Pid
	var lastErr error
	for {
		select {
		case <-p.done:
			if s.logMentions(p, "Address already in use") {
				return fmt.Errorf("%w %d: %v", errBind, s.port, p.err)
			}
			return fmt.Errorf("redis-server exited during startup: %v", p.err)
		default:
		}
		ready := "Ready to accept connections"
		if s.ready != "" {
			ready = s.ready
		}
		if s.logMentions(p, ready) {
			lastErr = pingAs(s.Addr(), pid)
			if lastErr == nil {
				return nil
			}
		} else {
			lastErr = errors.New("redis-server has not logged that it is ready")
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server (pid %d) not ready on %s after %v: %v", pid, s.Addr(), readyTimeout, lastErr)
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}

// logMentions reports whether the log lines written by the process p contain
// text. The log file is shared by successive processes of s, so only lines
// tagged with p's pid ("PID:X ...") count.
func (s *Server) logMentions(p *serverProc, text string) bool {
	data, err := os.ReadFile(s.logPath)
	if err != nil {
		return false
	}
	prefix := strconv.Itoa(p.cmd.Process.Pid) + ":"
	for line := range strings.SplitSeq(string(data), "\n") {
		if strings.HasPrefix(line, prefix) && strings.Contains(line, text) {
			return true
		}
	}
	return false
}

// diagnostics returns what the server's processes wrote, for failure
// messages.
func (s *Server) diagnostics() string {
	var b strings.Builder
	for _, f := range []struct{ name, path string }{
		{"stdout/stderr", s.outPath},
		{"log file", s.logPath},
	} {
		data, err := os.ReadFile(f.path)
		switch {
		case err != nil:
			fmt.Fprintf(&b, "--- %s %s: %v\n", f.name, f.path, err)
		default:
			fmt.Fprintf(&b, "--- %s %s:\n%s\n", f.name, f.path, data)
		}
	}
	return b.String()
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		return 0, err
	}
	return port, nil
}

// pingAs sends PING and INFO server to addr and checks that the server there
// is the process pid.
func pingAs(addr string, pid int) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return err
	}
	r := bufio.NewReader(conn)

	if _, err := io.WriteString(conn, "*1\r\n$4\r\nPING\r\n"); err != nil {
		return err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", line)
	}

	if _, err := io.WriteString(conn, "*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n"); err != nil {
		return err
	}
	header, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(header, "$") {
		return fmt.Errorf("INFO answered %q", header)
	}
	n, err := strconv.Atoi(strings.TrimSpace(header[1:]))
	if err != nil || n < 0 {
		return fmt.Errorf("INFO answered %q", header)
	}
	body := make([]byte, n+2)
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	want := "process_id:" + strconv.Itoa(pid)
	for line := range strings.SplitSeq(string(body), "\n") {
		if strings.TrimSpace(line) == want {
			return nil
		}
	}
	return fmt.Errorf("the server on %s is not process %d", addr, pid)
}
