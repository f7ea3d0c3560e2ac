// Package kinds is where the stores and brokers oncehook ships register:
// the one list the binary (cmd/oncehook) and the test helper
// (oncehooktest) pass to the gateway. The root package imports no backend
// and no broker client; a library user who wants fewer passes its own
// oncehook.Kinds (only SQLite, say) and builds no other client.
//
// A new store kind is its package under store/ with a Kind() and one line
// in Stores; a new broker, its package under broker/ with a Kind() and one
// line in Brokers (see docs/design.md).
package kinds

import (
	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/broker"
	"github.com/oncehook/oncehook/broker/amqp"
	"github.com/oncehook/oncehook/broker/kafka"
	"github.com/oncehook/oncehook/broker/nats"
	"github.com/oncehook/oncehook/broker/table"
	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/postgres"
	"github.com/oncehook/oncehook/store/redis"
	"github.com/oncehook/oncehook/store/sqlite"
)

// All is every kind oncehook ships.
func All() oncehook.Kinds {
	front := redis.Front()
	return oncehook.Kinds{Stores: Stores(), Front: &front, Brokers: Brokers()}
}

// Stores are the backends, by the scheme of the store: URL.
func Stores() []store.Kind {
	return []store.Kind{
		sqlite.Kind(),
		postgres.Kind(),
	}
}

// Brokers are the queue transports, by the key of their consume: and
// publish: blocks.
func Brokers() []broker.Kind {
	return []broker.Kind{
		nats.Kind(),
		amqp.Kind(),
		kafka.Kind(),
		table.Kind(),
	}
}
