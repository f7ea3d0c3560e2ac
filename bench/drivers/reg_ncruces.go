//go:build ncruces

package drivers

import (
	_ "github.com/ncruces/go-sqlite3/driver"
	_ "github.com/ncruces/go-sqlite3/embed"
)

const driverName = "sqlite3"
