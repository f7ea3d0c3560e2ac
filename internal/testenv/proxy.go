package testenv

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP proxy a test can cut and restore, to make a real server
// (PostgreSQL) unreachable without stopping it for everyone else.
type Proxy struct {
	Addr   string // where clients connect; stable across Stop and Start
	target string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
}

// NewProxy starts a proxy to target; it is stopped when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	p := &Proxy{target: target, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.Addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.Stop)
	return p
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
}

func (p *Proxy) pipe(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // stopped meanwhile
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	go func() { io.Copy(up, c); up.Close(); c.Close() }()
	io.Copy(c, up)
	c.Close()
	up.Close()
}

// Stop refuses new connections and cuts every open one.
func (p *Proxy) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

// Start listens again on the same address.
func (p *Proxy) Start(t testing.TB) {
	ln, err := net.Listen("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	p.serve(ln)
}
