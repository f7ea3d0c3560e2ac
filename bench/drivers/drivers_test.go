// Package drivers compares SQLite drivers on oncehook's claim: the same
// schema and statement, durable (WAL, synchronous=FULL) commits of unique
// 1 KiB events in group-commit batches. It is a module of its own so that
// the cgo driver never enters oncehook's build. Run one driver at a time
// (they register the same name):
//
//	go test -bench . -benchtime 2s                 # modernc.org/sqlite (pure Go)
//	go test -tags ncruces -bench . -benchtime 2s   # ncruces/go-sqlite3 (Wasm)
//	go test -tags mattn -bench . -benchtime 2s     # mattn/go-sqlite3 (cgo)
package drivers

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

const schema = `CREATE TABLE events (id INTEGER PRIMARY KEY, source TEXT NOT NULL, key TEXT NOT NULL, keyless INTEGER NOT NULL DEFAULT 0,
 content_type TEXT NOT NULL, body BLOB NOT NULL, received_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, UNIQUE (source, key));
CREATE INDEX events_expires_at ON events (expires_at);`

func BenchmarkDrivers(b *testing.B) {
	for _, batch := range []int{1, 64, 256} {
		b.Run(fmt.Sprintf("%s/batch=%d", driverName, batch), func(b *testing.B) {
			db, err := sql.Open(driverName, "file:"+filepath.Join(b.TempDir(), "x.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			db.SetMaxOpenConns(1)
			for _, p := range []string{"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", schema} {
				if _, err := db.Exec(p); err != nil {
					b.Fatal(err)
				}
			}
			ins, err := db.Prepare(`INSERT INTO events (source, key, keyless, content_type, body, received_at, expires_at)
				VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (source, key) DO NOTHING RETURNING id`)
			if err != nil {
				b.Fatal(err)
			}
			body := []byte(strings.Repeat("x", 1024))
			n := 0
			for b.Loop() {
				tx, err := db.Begin()
				if err != nil {
					b.Fatal(err)
				}
				st := tx.Stmt(ins)
				for range batch {
					n++
					var id int64
					if err := st.QueryRow("bench", fmt.Sprintf("evt_%012d", n), false, "application/json", body, 1, 2).Scan(&id); err != nil {
						b.Fatal(err)
					}
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
