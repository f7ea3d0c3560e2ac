package sqlite

import sqlite3 "modernc.org/sqlite/lib"

// Driver is the module of the database/sql driver this store runs on:
// SQLite's C translated to Go, so a build needs no cgo and cross-compiles
// with GOOS and GOARCH alone. `oncehook version` names its version.
const Driver = "modernc.org/sqlite"

// Library is the SQLite release the driver compiles in. No system SQLite
// is loaded, so the store behaves the same on every platform a release
// is built for.
const Library = sqlite3.SQLITE_VERSION
