// Package brokertest makes the brokers' queues and streams a test of a
// gateway consumes from: each its own, under a unique name, deleted when
// the test ends. It stands apart from testenv so that only the tests that
// need the brokers' clients link them.
package brokertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/oncehook/oncehook/internal/testenv"
)

// NATSStream makes a stream of the test's own on the server at url
// (subjects <prefix>.>), deleted when the test ends.
func NATSStream(t testing.TB, url string, storage jetstream.StorageType) (js jetstream.JetStream, name, prefix string) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	var b [5]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	name, prefix = "GW"+strings.ToUpper(id), "gw"+id
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{prefix + ".>"}, Storage: storage}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		js.DeleteStream(ctx, name)
	})
	return js, name, prefix
}

// RabbitQueue declares a fresh queue on the test broker, with a dead-letter
// exchange and queue, both deleted when the test ends; it returns the
// broker's URL, an open confirm-mode channel, and the two queues' names.
func RabbitQueue(t testing.TB) (base string, ch *amqp.Channel, queue, dead string) {
	t.Helper()
	base = testenv.RabbitMQ(t)
	conn, err := amqp.Dial(base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if ch, err = conn.Channel(); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	queue = fmt.Sprintf("oncehook-gw-%08x", mrand.Uint32())
	dead = queue + ".dead"
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(ch.ExchangeDeclare(dead, "fanout", false, false, false, false, nil))
	_, err = ch.QueueDeclare(dead, false, false, false, false, nil)
	must(err)
	must(ch.QueueBind(dead, "", dead, false, nil))
	_, err = ch.QueueDeclare(queue, true, false, false, false, amqp.Table{"x-dead-letter-exchange": dead})
	must(err)
	t.Cleanup(func() {
		c, err := conn.Channel()
		if err != nil {
			return
		}
		c.QueueDelete(queue, false, false, false)
		c.QueueDelete(dead, false, false, false)
		c.ExchangeDelete(dead, false, false)
		c.Close()
	})
	return base, ch, queue, dead
}
