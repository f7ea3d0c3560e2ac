package effect

import "time"

// SetRecordFor shortens how long Do tries to record an outcome, for a
// test; it returns the restore.
func SetRecordFor(d time.Duration) func() {
	old := recordFor
	recordFor = d
	return func() { recordFor = old }
}
