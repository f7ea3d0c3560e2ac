//go:build !unix

package pull

import "os"

// lock does nothing where there is no flock: give each listener its own
// journal.
func lock(*os.File) error { return nil }
