//go:build !mattn && !ncruces

package drivers

import _ "modernc.org/sqlite"

const driverName = "sqlite"
