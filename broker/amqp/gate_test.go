package amqp

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	crand "crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/oncehook/oncehook/broker"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/receive"
)

// frame is one AMQP 0-9-1 frame on channel 1.
func frame(typ byte, payload []byte) []byte {
	b := []byte{typ, 0, 1, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[3:], uint32(len(payload)))
	return append(append(b, payload...), frameEnd)
}

// deliveryFrames is what a broker sends for one delivery of a body of n bytes:
// basic.deliver, the content header, the body in frames of at most 4 KiB.
func deliveryFrames(n int) []byte {
	out := frame(frameMethod, []byte("\x00\x3c\x00\x3c deliver args"))
	header := make([]byte, 14)
	binary.BigEndian.PutUint16(header, 60)
	binary.BigEndian.PutUint64(header[headerBodySize:], uint64(n))
	out = append(out, frame(frameHeader, header)...)
	body := bytes.Repeat([]byte("b"), n)
	for len(body) > 0 {
		k := min(len(body), 4096)
		out = append(out, frame(frameBody, body[:k])...)
		body = body[k:]
	}
	return out
}

// wire is a connection whose reads come in pieces of random sizes (a frame's head split anywhere).
type wire struct {
	net.Conn
	r    *bytes.Reader
	most int // the largest piece (default 13 bytes)
}

func (w *wire) Read(p []byte) (int, error) {
	if w.r.Len() == 0 {
		return 0, io.EOF
	}
	most := w.most
	if most == 0 {
		most = 13
	}
	return w.r.Read(p[:min(len(p), 1+rand.IntN(most))])
}
func (w *wire) SetReadDeadline(time.Time) error { return nil }
func (w *wire) SetDeadline(time.Time) error     { return nil }

// intake is a real intake's budget for the source orders: max_body_size 1 MiB, max_inflight_bytes 2 MiB.
func intake(t *testing.T) *broker.Intake {
	t.Helper()
	h := receive.New(receive.Options{Sources: []receive.Source{{Name: "orders"}}, MaxBodySize: 1 << 20, MaxInflightBytes: 2 << 20})
	return broker.NewIntake(broker.Source{Name: "orders", Accept: h})
}

// The gate counts, in intake's budget, exactly the body bytes of the messages Accept would take, wherever
// the reads split the frames: not a message over max_body_size (it could never fit), not an empty one,
// not the frames around them; and each delivery takes its own back.
func TestTheGateCountsEachBodyAsItIsRead(t *testing.T) {
	in := intake(t)
	stream := in.Stream()
	defer stream.Close()
	sizes := []int{1000, 0, 300 << 10, 2 << 20, 5, 64 << 10}
	var wireBytes []byte
	want := 0
	for i, n := range sizes {
		wireBytes = append(wireBytes, deliveryFrames(n)...)
		if i == 2 {
			wireBytes = append(wireBytes, frame(frameHeartbeat, nil)...)
		}
		if n > 0 && n <= 1<<20 {
			want += n
		}
	}
	g := newGate(&wire{r: bytes.NewReader(wireBytes)}, context.Background(), stream)
	got, err := io.ReadAll(g)
	if err != nil || !bytes.Equal(got, wireBytes) {
		t.Fatalf("read %d of %d bytes: %v", len(got), len(wireBytes), err)
	}
	if g.lost || in.HeldBytes() != int64(want) {
		t.Fatalf("the gate counted %d bytes (lost %v), want %d: the counted bodies", in.HeldBytes(), g.lost, want)
	}
	for _, n := range sizes {
		in.Release(stream.Take(n))
	}
	if in.HeldBytes() != 0 {
		t.Fatalf("%d bytes left held once every delivery was taken and answered", in.HeldBytes())
	}

	// Bytes that are not frames (a broker answering the protocol header with its own) are passed on, uncounted.
	odd := append([]byte("AMQP\x00\x00\x09\x01"), deliveryFrames(1000)...)
	g = newGate(&wire{r: bytes.NewReader(odd)}, context.Background(), stream)
	if got, _ := io.ReadAll(g); !bytes.Equal(got, odd) || !g.lost || in.HeldBytes() != 0 {
		t.Fatalf("not frames: read %d of %d, lost %v, held %d", len(got), len(odd), g.lost, in.HeldBytes())
	}
}

// While the budget has no room, the gate stops reading, until a message is answered (its room given back)
// or the session ends.
func TestTheGateStopsReadingWhileTheBudgetIsFull(t *testing.T) {
	in := intake(t)
	stream := in.Stream()
	defer stream.Close()
	var wireBytes []byte
	for range 3 {
		wireBytes = append(wireBytes, deliveryFrames(900<<10)...) // two fit in 2 MiB, not three
	}
	g := newGate(&wire{r: bytes.NewReader(wireBytes), most: 64 << 10}, context.Background(), stream)
	read := make(chan int64, 1)
	go func() {
		n, _ := io.Copy(io.Discard, g)
		read <- n
	}()
	if !testenv.WaitFor(5*time.Second, func() bool { return in.HeldBytes() >= 2*900<<10 }) {
		t.Fatalf("held %d bytes: the gate did not read two bodies", in.HeldBytes())
	}
	time.Sleep(200 * time.Millisecond)
	select {
	case n := <-read:
		t.Fatalf("the gate read all %d bytes with the budget full", n)
	default:
	}
	if held := in.HeldBytes(); held > 2<<20 || held < 2*900<<10 {
		t.Fatalf("held %d bytes while waiting, want the budget's 2 MiB at most and two bodies at least", held)
	}
	in.Release(stream.Take(900 << 10))
	select {
	case n := <-read:
		if n != int64(len(wireBytes)) {
			t.Fatalf("read %d of %d", n, len(wireBytes))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a message answered made no room for the gate")
	}

	// The session's end lets every byte through.
	full := in.Stream()
	defer full.Close()
	ctx, cancel := context.WithCancel(context.Background())
	g = newGate(&wire{r: bytes.NewReader(wireBytes), most: 64 << 10}, ctx, full)
	go func() {
		n, _ := io.Copy(io.Discard, g)
		read <- n
	}()
	time.Sleep(200 * time.Millisecond)
	cancel()
	select {
	case n := <-read:
		if n != int64(len(wireBytes)) {
			t.Fatalf("read %d of %d", n, len(wireBytes))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the gate kept waiting after its session ended")
	}
}

// Over amqps://, the gate needs the plain frames: dial makes the TLS connection itself, under the gate,
// with the URL's CA file and server name, and the consumer takes messages through it. A TLS proxy in
// front of the test broker stands for a broker that speaks TLS.
func TestAConsumerOverTLSReadsThroughTheGate(t *testing.T) {
	r := newRabbit(t)
	u, err := url.Parse(r.url)
	if err != nil {
		t.Fatal(err)
	}
	caFile, cert := selfSigned(t)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, err := net.Dial("tcp", u.Host)
				if err != nil {
					return
				}
				defer b.Close()
				go io.Copy(b, c)
				io.Copy(c, b)
			}()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	tlsURL := fmt.Sprintf("amqps://%s@localhost:%s%s?cacertfile=%s", u.User.String(), port, u.Path, url.QueryEscape(caFile))

	q, _ := r.queue(false)
	for i := range 5 {
		r.publish(q, fmt.Sprintf(`{"id":"tls-%d"}`, i), amqp.Publishing{})
	}
	in := intake(t)
	var wrapped *gate
	conn, err := dial(context.Background(), tlsURL, "oncehook test", func(nc net.Conn) net.Conn {
		wrapped = newGate(nc, context.Background(), in.Stream())
		return wrapped
	})
	if err != nil {
		t.Fatalf("dial %s: %v", tlsURL, err)
	}
	defer conn.Close()
	if _, ok := wrapped.Conn.(*tls.Conn); !ok {
		t.Fatalf("the gate wraps a %T, want the TLS connection", wrapped.Conn)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume(q, "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		select {
		case d := <-deliveries:
			if !strings.HasPrefix(string(d.Body), `{"id":"tls-`) {
				t.Fatalf("delivery %d: %q", i, d.Body)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of 5 deliveries over TLS", i)
		}
	}
	if wrapped.lost || in.HeldBytes() == 0 {
		t.Fatalf("over TLS the gate read no frames (lost %v, held %d)", wrapped.lost, in.HeldBytes())
	}
}

// selfSigned makes a certificate for localhost and writes it, as its own CA, to a file.
func selfSigned(t *testing.T) (caFile string, cert tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"localhost"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(crand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return caFile, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
