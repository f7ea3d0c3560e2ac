package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncehook/oncehook/store"
)

// LockWait returns the collectors of the store's writer's waits for a lock
// another connection holds (store.LockWait: SQLite's one write lock, held
// by a transaction a caller keeps open on the file), read at each scrape.
// The gauge shows a wait going on now, for an alert; the counter shows
// the short ones a scrape falls between (rate() of it is the share of the
// time the writer spent waiting).
func LockWait(read func() store.LockWait) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "oncehook_store_lock_wait_seconds",
			Help: "How long the store's writer has waited, now, for a write lock another connection holds (SQLite: a transaction kept open on the file); 0 when it waits for nothing. Every webhook waits behind it.",
		}, func() float64 { return read().For.Seconds() }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "oncehook_store_lock_wait_seconds_total",
			Help: "Time the store's writer spent waiting for a write lock another connection held, in all.",
		}, func() float64 { return read().Total.Seconds() }),
	}
}
