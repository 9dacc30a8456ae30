/*
Copyright 2026 The cluster-api-provider-mailgun Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package mailgunfake

import (
	"net"
	"sync"
)

// gatedListener is a listener that can stop listening and start again on
// the same address, so that clients meanwhile get "connection refused",
// as from a Mailgun blocked by egress rules, a wrong host or a dead proxy.
type gatedListener struct {
	addr net.Addr

	mu sync.Mutex
	// ln is the open listener, nil while refusing.
	ln net.Listener
	// opened is closed when ln is opened again.
	opened chan struct{}
	closed bool
}

func newGatedListener(ln net.Listener) *gatedListener {
	return &gatedListener{addr: ln.Addr(), ln: ln, opened: make(chan struct{})}
}

// refuse stops listening (on) or listens again (off).
func (g *gatedListener) refuse(on bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.closed:
		return net.ErrClosed
	case on && g.ln != nil:
		err := g.ln.Close()
		g.ln = nil
		return err
	case !on && g.ln == nil:
		ln, err := net.Listen("tcp", g.addr.String())
		if err != nil {
			return err
		}
		g.ln = ln
		close(g.opened)
		g.opened = make(chan struct{})
	}
	return nil
}

// Accept waits while refusing; a listener closed by refuse is replaced,
// not an error.
func (g *gatedListener) Accept() (net.Conn, error) {
	for {
		g.mu.Lock()
		ln, opened, closed := g.ln, g.opened, g.closed
		g.mu.Unlock()
		switch {
		case closed:
			return nil, net.ErrClosed
		case ln == nil:
			<-opened
			continue
		}
		c, err := ln.Accept()
		if err == nil {
			return c, nil
		}
		g.mu.Lock()
		replaced := g.ln != ln && !g.closed
		g.mu.Unlock()
		if !replaced {
			return nil, err
		}
	}
}

func (g *gatedListener) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.closed = true
	close(g.opened)
	if g.ln != nil {
		return g.ln.Close()
	}
	return nil
}

func (g *gatedListener) Addr() net.Addr { return g.addr }
