//go:build mattn

package drivers

import _ "github.com/mattn/go-sqlite3"

const driverName = "sqlite3"
