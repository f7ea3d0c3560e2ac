package receive

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/oncehook/oncehook/internal/jsonhttp"
)

// What net/http answers on its own, before any handler runs, is intake's
// too: a request refused there is answered in the one error shape and
// counted by reason, as every other rejection is.
const (
	// ReasonBadPath is a path with an empty or dot segment (//in/demo,
	// /in/../in/demo): 400, not the redirect to the clean path that
	// http.ServeMux would answer (which a provider may follow, or not).
	ReasonBadPath = "bad_path"
	// ReasonHeaderTooLarge is a request whose header is over net/http's
	// limit (1 MiB): 431, which net/http writes itself in plain text.
	ReasonHeaderTooLarge = "header_too_large"
)

// Paths answers a request whose path is not clean with 400, counted and
// logged at a bounded rate as an unknown path is, and hands the others to
// next (the intake listener's mux).
func (h *Handler) Paths(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; p != "" && r.Method != http.MethodConnect && p != cleanPath(p) {
			h.metrics.Request("", ReasonBadPath)
			if log, suppressed := h.unknown.pace(h.now()); log {
				h.log.Info("request rejected", "status", http.StatusBadRequest, "reason", ReasonBadPath,
					"path", bounded(p), "client", h.client(r), "not_logged_since", suppressed)
			}
			jsonhttp.WriteJSON(w, http.StatusBadRequest, ErrorResponse{Reason: ReasonBadPath,
				Error: bounded("the path has an empty or dot segment: send to " + cleanPath(p))})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// cleanPath is p as http.ServeMux serves it: rooted, without empty or dot
// segments, its trailing slash kept.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] == '/' && !strings.Contains(p, "//") && !strings.Contains(p, "/.") {
		return p // the common case, at no cost
	}
	if p[0] != '/' {
		p = "/" + p
	}
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}

// Listener returns ln, whose connections answer a request whose header is
// over net/http's limit in intake's error shape, counted (net/http writes
// its own plain-text 431 to the connection, before any handler could).
// Wrap the plain listener: a TLS one's connections are wrapped above TLS,
// keeping its state for the requests (tlsConfig, when set, is the
// listener's TLS).
func (h *Handler) Listener(ln net.Listener, tlsConfig *tls.Config) net.Listener {
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	return &guardedListener{Listener: ln, h: h}
}

type guardedListener struct {
	net.Listener
	h *Handler
}

func (l *guardedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*tls.Conn); ok {
		return &guardedTLSConn{guardedConn{Conn: c, h: l.h}, tc}, nil
	}
	return &guardedConn{Conn: c, h: l.h}, nil
}

// headerTooLarge is what net/http writes to a connection whose request
// header is over its limit, byte for byte, in one Write.
const headerTooLarge = "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n431 Request Header Fields Too Large"

// guardedConn writes intake's answer where net/http writes its own 431.
type guardedConn struct {
	net.Conn
	h *Handler
}

func (c *guardedConn) Write(p []byte) (int, error) {
	if string(p) != headerTooLarge {
		return c.Conn.Write(p)
	}
	c.h.metrics.Request("", ReasonHeaderTooLarge)
	if log, suppressed := c.h.unknown.pace(c.h.now()); log {
		c.h.log.Info("request rejected", "status", http.StatusRequestHeaderFieldsTooLarge, "reason", ReasonHeaderTooLarge,
			"client", c.RemoteAddr().String(), "not_logged_since", suppressed)
	}
	body, _ := json.Marshal(ErrorResponse{Error: "the request's header is over 1 MiB", Reason: ReasonHeaderTooLarge})
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: application/json\r\n")
	b.WriteString("X-Content-Type-Options: nosniff\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(body)+1) + "\r\n\r\n")
	b.Write(body)
	b.WriteByte('\n')
	if _, err := c.Conn.Write(b.Bytes()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// guardedTLSConn is a guardedConn over TLS. net/http takes the requests'
// TLS state from its ConnectionState, as from a *tls.Conn, and the
// handshake runs at the first read (the header's deadline bounds it).
type guardedTLSConn struct {
	guardedConn
	tls *tls.Conn
}

func (c *guardedTLSConn) ConnectionState() tls.ConnectionState { return c.tls.ConnectionState() }

// Read tells a client that sent plain HTTP to the TLS listener so, in
// plain HTTP, as net/http does for a *tls.Conn it handshakes itself.
func (c *guardedTLSConn) Read(p []byte) (int, error) {
	n, err := c.tls.Read(p)
	var re tls.RecordHeaderError
	if errors.As(err, &re) && re.Conn != nil && looksLikeHTTP(re.RecordHeader) {
		io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
		re.Conn.Close()
	}
	return n, err
}

// looksLikeHTTP reports whether a TLS record's first bytes are an HTTP
// request's.
func looksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO", "DELET", "PATCH":
		return true
	}
	return false
}
