package testenv

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy relays TCP connections to a server and can cut them on demand:
// tests use it to make ClickHouse unreachable for a while (every insert
// fails with a network error and is retried) without touching the shared
// server. Safe for concurrent use.
type Proxy struct {
	Addr string // where clients connect

	ln       net.Listener
	upstream string
	mu       sync.Mutex
	cut      bool
	open     map[net.Conn]bool
}

// NewProxy starts a proxy to upstream (host:port); it closes when the test
// ends.
func NewProxy(t testing.TB, upstream string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: proxy: %v", err)
	}
	p := &Proxy{Addr: ln.Addr().String(), ln: ln, upstream: upstream, open: map[net.Conn]bool{}}
	go p.accept()
	t.Cleanup(func() { ln.Close(); p.Cut() })
	return p
}

// Cut closes every relayed connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.open {
		c.Close()
	}
}

// Restore accepts and relays connections again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// track remembers c for Cut; false (and c closed) while cut.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		c.Close()
		return false
	}
	p.open[c] = true
	return true
}

func (p *Proxy) forget(c net.Conn) {
	p.mu.Lock()
	delete(p.open, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed at cleanup
		}
		if !p.track(c) {
			continue
		}
		go func() {
			defer p.forget(c)
			up, err := net.DialTimeout("tcp", p.upstream, 5*time.Second)
			if err != nil || !p.track(up) {
				return
			}
			defer p.forget(up)
			done := make(chan struct{}, 2)
			pipe := func(dst, src net.Conn) { io.Copy(dst, src); dst.Close(); src.Close(); done <- struct{}{} }
			go pipe(up, c)
			go pipe(c, up)
			<-done
			<-done
		}()
	}
}
