package testenv

import (
	"net/url"
	"testing"
)

// RabbitMQBase is the broker tests use; ONCEHOOK_TEST_AMQP overrides it.
func RabbitMQBase() string {
	return fromEnv("ONCEHOOK_TEST_AMQP", "amqp://guest:guest@127.0.0.1:5672/")
}

// RabbitMQ returns the test broker's URL, after checking it listens. Each
// test declares (and deletes) queues of its own, under unique names.
func RabbitMQ(t testing.TB) string {
	t.Helper()
	return reachable(t, "RabbitMQ", RabbitMQBase())
}

// Via is rawURL with its host replaced by addr (a Proxy's): the same
// credentials and virtual host, through the proxy.
func Via(t testing.TB, rawURL, addr string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = addr
	return u.String()
}
