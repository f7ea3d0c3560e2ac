package channel_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"mime"
	"net"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/internal/alert/channel"
)

// python is Debian's Python, which has Debian's aiosmtpd (.ci/run
// installs python3-aiosmtpd); a pyenv's python3 on PATH may not.
const python = "/usr/bin/python3"

// smtpServer is a real SMTP server (aiosmtpd) started for one test; its
// messages are files in out.
type smtpServer struct {
	port int
	out  string
	pool *x509.CertPool // trusts its certificate
}

// startSMTP starts aiosmtpd on a free port: with tlsOn, STARTTLS
// required before anything; with user, AUTH required (over TLS). Without
// aiosmtpd the test is skipped, but fails under CI.
func startSMTP(t *testing.T, tlsOn bool, user, password string) *smtpServer {
	t.Helper()
	if out, err := exec.Command(python, "-c", "import aiosmtpd").CombinedOutput(); err != nil {
		msg := "Debian's python3-aiosmtpd (apt-get install -y python3-aiosmtpd): " + strings.TrimSpace(string(out))
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is required under CI: %v", msg, err)
		}
		t.Skipf("%s: %v; set CI=1 to make this a failure", msg, err)
	}
	s := &smtpServer{out: t.TempDir()}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	args := []string{"testdata/smtpd.py", "--port", strconv.Itoa(s.port), "--out", s.out}
	if tlsOn {
		cert, key, pool := selfSigned(t)
		s.pool = pool
		args = append(args, "--cert", cert, "--key", key)
	}
	if user != "" {
		args = append(args, "--user", user, "--password", password)
	}
	cmd := exec.Command(python, args...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- line
	}()
	select {
	case line := <-ready:
		if !strings.HasPrefix(line, "ready") {
			t.Fatalf("aiosmtpd did not start: %q", line)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("aiosmtpd did not start in 20s")
	}
	return s
}

// messages are the messages the server accepted, in order.
func (s *smtpServer) messages(t *testing.T) []smtpMessage {
	t.Helper()
	var out []smtpMessage
	for i := 1; ; i++ {
		b, err := os.ReadFile(filepath.Join(s.out, strconv.Itoa(i)+".json"))
		if os.IsNotExist(err) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		var m smtpMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
}

func (s *smtpServer) authLog() string {
	b, _ := os.ReadFile(filepath.Join(s.out, "auth.log"))
	return string(b)
}

type smtpMessage struct {
	MailFrom      string   `json:"mail_from"`
	RcptTos       []string `json:"rcpt_tos"`
	Data          string   `json:"data"`
	TLS           bool     `json:"tls"`
	Authenticated bool     `json:"authenticated"`
	Login         string   `json:"login"`
}

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns
// a pool that trusts it.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	c, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(c)
	return certFile, keyFile, pool
}

func emailChannel(t *testing.T, s *smtpServer, smtp config.SMTP) channel.Channel {
	t.Helper()
	smtp.Host, smtp.Port = "127.0.0.1", s.port
	if smtp.From == "" {
		smtp.From = "oncehook <alerts@example.com>"
	}
	if smtp.To == nil {
		smtp.To = []string{"ops@example.com", "Ana <ana@example.com>"}
	}
	chs, err := channel.FromConfig(config.Alerts{Channels: []config.AlertChannel{{Name: "mail", Kind: "email", SMTP: smtp}}},
		channel.Deps{TLS: &tls.Config{RootCAs: s.pool}})
	if err != nil {
		t.Fatal(err)
	}
	return chs[0]
}

// An email channel upgrades with STARTTLS, authenticates, and sends one
// message per notice to every recipient, whose subject says opened or
// resolved and where, and whose body has the figures and the link.
func TestEmailOverSTARTTLSWithAuth(t *testing.T) {
	s := startSMTP(t, true, "alerts", "pa55word")
	ch := emailChannel(t, s, config.SMTP{Username: "alerts", Password: "pa55word"})
	ctx := context.Background()
	for _, ev := range []string{channel.EventOpened, channel.EventResolved} {
		if err := ch.Send(ctx, notice(ev)); err != nil {
			t.Fatalf("%s: %v", ev, err)
		}
	}
	msgs := s.messages(t)
	if len(msgs) != 2 {
		t.Fatalf("%d messages, want 2", len(msgs))
	}
	for i, want := range []string{"[oncehook] Opened: duplicate rate at source stripe", "[oncehook] Resolved: duplicate rate at source stripe"} {
		m := msgs[i]
		if !m.TLS || !m.Authenticated || m.Login != "alerts" {
			t.Errorf("message %d: tls %v, authenticated %v as %q; want over TLS as alerts", i, m.TLS, m.Authenticated, m.Login)
		}
		if m.MailFrom != "alerts@example.com" || strings.Join(m.RcptTos, ",") != "ops@example.com,ana@example.com" {
			t.Errorf("message %d: envelope %s -> %v", i, m.MailFrom, m.RcptTos)
		}
		msg, err := mail.ReadMessage(strings.NewReader(m.Data))
		if err != nil {
			t.Fatal(err)
		}
		subject, _ := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
		if subject != want {
			t.Errorf("subject = %q, want %q", subject, want)
		}
		if msg.Header.Get("Message-ID") == "" || msg.Header.Get("Auto-Submitted") != "auto-generated" {
			t.Errorf("headers: %v", msg.Header)
		}
	}
	body := msgs[0].Data
	for _, want := range []string{"31.0% of 812 events", "Value: 31.0%", "Threshold: 6.0%", "https://hooks.example.com/ui/issues/iss_42"} {
		if !strings.Contains(strings.ReplaceAll(body, "=\r\n", ""), want) {
			t.Errorf("body lacks %q:\n%s", want, body)
		}
	}
	if log := s.authLog(); strings.Contains(log, "tls=False") {
		t.Errorf("AUTH tried without TLS: %s", log)
	}
}

// A wrong password is an error that does not quote the password, and
// nothing is sent.
func TestEmailWrongPassword(t *testing.T) {
	s := startSMTP(t, true, "alerts", "pa55word")
	ch := emailChannel(t, s, config.SMTP{Username: "alerts", Password: "not-the-pa55"})
	err := ch.Send(context.Background(), notice(channel.EventOpened))
	if err == nil || !strings.Contains(err.Error(), "AUTH") || strings.Contains(err.Error(), "not-the-pa55") {
		t.Fatalf("err = %v, want an AUTH error without the password", err)
	}
	if n := len(s.messages(t)); n != 0 {
		t.Fatalf("%d messages sent", n)
	}
}

// A server that does not offer STARTTLS is refused before anything is
// said (by default): no password, no message, over a connection anyone
// on the way could read.
func TestEmailRefusesAServerWithoutSTARTTLS(t *testing.T) {
	s := startSMTP(t, false, "", "")
	ch := emailChannel(t, s, config.SMTP{Username: "alerts", Password: "pa55word"})
	err := ch.Send(context.Background(), notice(channel.EventOpened))
	if err == nil || !strings.Contains(err.Error(), "STARTTLS") {
		t.Fatalf("err = %v, want one saying the server offers no STARTTLS", err)
	}
	if n := len(s.messages(t)); n != 0 {
		t.Fatalf("%d messages sent without TLS", n)
	}
	// starttls: false is the operator's choice, for a relay on a trusted
	// network (here without AUTH).
	off := false
	ch = emailChannel(t, s, config.SMTP{StartTLS: &off})
	if err := ch.Send(context.Background(), notice(channel.EventOpened)); err != nil {
		t.Fatal(err)
	}
	if msgs := s.messages(t); len(msgs) != 1 || msgs[0].TLS {
		t.Fatalf("messages: %+v", msgs)
	}
}
