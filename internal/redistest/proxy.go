package redistest

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	// proxyBufSize is the size of the read buffer of each direction of a
	// proxied connection, and so the largest chunk.
	proxyBufSize = 32 << 10
	// matchTail is how many bytes of the previous client chunk are kept so
	// that DropNextReply also sees a substring split across two chunks.
	matchTail = 256
	// proxyDialTimeout bounds the dial to the proxy's target.
	proxyDialTimeout = 5 * time.Second
)

// Proxy is a TCP proxy on 127.0.0.1 that forwards each accepted connection
// to a target address and can inject faults: latency, a black hole, reset
// connections and dropped replies. It is closed, with all its connections
// and goroutines, in the t.Cleanup of the test that created it. Its methods
// are safe for concurrent use.
//
// The proxy works on chunks: whatever one read from a socket returned (at
// most 32 KiB). Latency is added per chunk, and DropNextReply matches
// chunks, keeping the end of the previous chunk so that a substring split
// between two reads is still found. A reply is dropped by discarding the next
// chunk the server sends, which is right for clients that wait for each reply
// before sending the next command, as go-redis does outside pipelines.
type Proxy struct {
	target string
	ln     net.Listener

	latency   atomic.Int64 // time.Duration
	blackhole atomic.Bool
	dropped   atomic.Int64

	ctx    context.Context // cancelled by Close, to abort dials
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	dropSub  []byte // lower-case substring armed by DropNextReply; nil when disarmed
	dropLeft int    // replies still to drop for dropSub
	dropFn   func() // run after an armed drop, before the connection closes
	conns    map[*proxyConn]struct{}
	closed   bool
}

// proxyConn is one proxied connection: client <-> proxy <-> server.
type proxyConn struct {
	client, server net.Conn
	done           chan struct{} // closed when the connection is closed
	closeOnce      sync.Once
	// dropReply is set when a client chunk matched DropNextReply: the next
	// server chunk is discarded and the connection closed.
	dropReply atomic.Bool
	dropFn    func() // DropNextReplyThen's then; written before dropReply is set
}

// NewProxy starts a proxy on 127.0.0.1:0 that forwards to target (host:port).
// It is closed in t.Cleanup.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: proxy listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		target: target,
		ln:     ln,
		ctx:    ctx,
		cancel: cancel,
		conns:  make(map[*proxyConn]struct{}),
	}
	p.wg.Add(1)
	go p.acceptLoop()
	t.Cleanup(p.Close)
	return p
}

// Addr returns the address clients should dial, "127.0.0.1:PORT".
func (p *Proxy) Addr() string {
	return p.ln.Addr().String()
}

// Target returns the address the proxy forwards to.
func (p *Proxy) Target() string {
	return p.target
}

// DropNextReply arms the proxy once: the next client-to-server chunk that
// contains substr (ASCII case-insensitive, e.g. "evalsha") is forwarded to
// the server as usual, but the server's reply on that connection is read and
// discarded, and the connection is then closed on both sides. The command
// therefore runs on the server while the client only sees the connection
// end (go-redis then retries on a new connection, running the command
// again). A later call replaces an armed substring that has not matched yet.
func (p *Proxy) DropNextReply(substr string) {
	p.DropReplies(substr, 1)
}

// DropNextReplyThen is DropNextReply that also runs then (if not nil) after
// the reply was discarded and before the connection is closed: the client
// is still waiting for the reply, so whatever then does happens between
// the command's first run and any re-send of it. then runs on the proxy's
// goroutine; it must not use the proxied client.
func (p *Proxy) DropNextReplyThen(substr string, then func()) {
	p.DropReplies(substr, 1)
	p.mu.Lock()
	p.dropFn = then
	p.mu.Unlock()
}

// DropReplies is DropNextReply for the next n matching chunks: each one's
// reply is dropped and its connection closed, so a client that re-sends
// the command up to n-1 times gets no reply at all (its retries are
// exhausted) while the server runs every copy. n < 1 disarms.
func (p *Proxy) DropReplies(substr string, n int) {
	sub := asciiLower([]byte(substr))
	p.mu.Lock()
	p.dropSub, p.dropLeft, p.dropFn = sub, n, nil
	if n < 1 {
		p.dropSub = nil
	}
	p.mu.Unlock()
}

// Dropped returns how many replies DropNextReply has discarded so far.
func (p *Proxy) Dropped() int {
	return int(p.dropped.Load())
}

// SetLatency delays every chunk, in either direction, by d before it is
// forwarded. Zero turns the delay off. It applies from the next chunk on.
func (p *Proxy) SetLatency(d time.Duration) {
	p.latency.Store(int64(max(d, 0)))
}

// Blackhole, while on, makes the proxy read and discard the bytes of every
// connection in both directions; connections stay open, so clients only see
// their commands time out. Bytes discarded meanwhile are lost for good.
func (p *Proxy) Blackhole(on bool) {
	p.blackhole.Store(on)
}

// ResetAll closes every current connection, on both sides: clients see the
// connection end (EOF or a reset). The proxy keeps accepting new ones.
func (p *Proxy) ResetAll() {
	for _, pc := range p.snapshot() {
		p.closeConn(pc)
	}
}

// Conns returns the number of connections currently open through the proxy.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Close stops the listener, closes every connection and waits for all the
// proxy's goroutines to return. It is called by the cleanup and may be
// called before; later calls do nothing.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()

	p.cancel()
	_ = p.ln.Close()
	p.ResetAll()
	p.wg.Wait()
}

func (p *Proxy) snapshot() []*proxyConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	conns := make([]*proxyConn, 0, len(p.conns))
	for pc := range p.conns {
		conns = append(conns, pc)
	}
	return conns
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || p.ctx.Err() != nil {
				return
			}
			// Out of descriptors or the like: wait a little, unless closed.
			timer := time.NewTimer(backoff)
			select {
			case <-timer.C:
			case <-p.ctx.Done():
				timer.Stop()
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		// The accept loop holds a count, so Add cannot race with Wait
		// seeing zero.
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve dials the target for the accepted client and pumps bytes both ways.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	d := net.Dialer{Timeout: proxyDialTimeout}
	server, err := d.DialContext(p.ctx, "tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	pc := &proxyConn{client: client, server: server, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		pc.close()
		return
	}
	p.conns[pc] = struct{}{}
	p.wg.Add(1) // serve holds a count: see acceptLoop
	p.mu.Unlock()

	go func() {
		defer p.wg.Done()
		p.pump(pc, false)
	}()
	p.pump(pc, true)
}

// pump copies one direction of pc, chunk by chunk, applying the faults.
func (p *Proxy) pump(pc *proxyConn, fromClient bool) {
	defer p.closeConn(pc)
	src, dst := pc.server, pc.client
	if fromClient {
		src, dst = pc.client, pc.server
	}
	buf := make([]byte, proxyBufSize)
	var tail []byte // lower-cased end of the previous client chunk
	for {
		n, readErr := src.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			if !p.delay(pc) {
				return
			}
			if !p.blackhole.Load() {
				if fromClient {
					tail = p.matchDrop(pc, tail, chunk)
				} else if pc.dropReply.Load() {
					p.dropped.Add(1)
					if pc.dropFn != nil {
						pc.dropFn()
					}
					return // the deferred closeConn ends both sides
				}
				if _, err := dst.Write(chunk); err != nil {
					return
				}
			}
		}
		if readErr != nil {
			return
		}
	}
}

// delay waits for the configured latency; it reports false if pc was closed
// meanwhile.
func (p *Proxy) delay(pc *proxyConn) bool {
	d := time.Duration(p.latency.Load())
	if d <= 0 {
		return true
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-pc.done:
		return false
	}
}

// matchDrop checks a client chunk against the armed DropNextReply substring
// and, on a match, disarms it and marks pc so that its next reply is dropped.
// The mark is set before the chunk is forwarded, so the reply cannot slip
// through. It returns the new tail for the next call.
func (p *Proxy) matchDrop(pc *proxyConn, tail, chunk []byte) []byte {
	p.mu.Lock()
	if sub := p.dropSub; sub != nil {
		// Only len(sub)-1 bytes of the tail are used, so that any match
		// ends in this chunk: an old chunk cannot match twice.
		keep := min(len(tail), max(len(sub)-1, 0))
		window := append(append([]byte(nil), tail[len(tail)-keep:]...), asciiLower(chunk)...)
		if bytes.Contains(window, sub) {
			if p.dropLeft--; p.dropLeft <= 0 {
				p.dropSub = nil
			}
			pc.dropFn = p.dropFn
			p.dropFn = nil
			pc.dropReply.Store(true)
		}
	}
	p.mu.Unlock()

	end := asciiLower(chunk[max(len(chunk)-matchTail, 0):])
	tail = append(tail, end...)
	if len(tail) > matchTail {
		tail = append(tail[:0], tail[len(tail)-matchTail:]...)
	}
	return tail
}

// closeConn closes both sides of pc and forgets it.
func (p *Proxy) closeConn(pc *proxyConn) {
	p.mu.Lock()
	delete(p.conns, pc)
	p.mu.Unlock()
	pc.close()
}

func (pc *proxyConn) close() {
	pc.closeOnce.Do(func() {
		close(pc.done)
		_ = pc.client.Close()
		_ = pc.server.Close()
	})
}

// asciiLower returns a lower-cased copy of b, touching only ASCII letters so
// that binary data keeps its length.
func asciiLower(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return out
}
