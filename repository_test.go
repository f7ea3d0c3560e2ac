package oncehook_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// A store a test or a demo run leaves in the tree is never committed: a
// SQLite file (with its WAL and shared memory) is ignored in every folder,
// and none is tracked. One was (internal/dashboard/oncehook.db), 150 KB
// of a test's events shipped in the module.
func TestNoStoreFileIsCommitted(t *testing.T) {
	git := func(args ...string) (string, error) {
		out, err := exec.Command("git", args...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if _, err := git("rev-parse", "--is-inside-work-tree"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("not a git work tree under CI: %v", err)
		}
		t.Skip("not a git work tree: nothing to check")
	}
	if out, err := git("ls-files", "*.db", "*.db-wal", "*.db-shm", "*.sqlite", "*.sqlite3"); err != nil || out != "" {
		t.Errorf("store files are committed (%v):\n%s", err, out)
	}
	for _, p := range []string{"oncehook.db", "internal/dashboard/oncehook.db", "store/sqlite/x.db-wal", "cmd/oncehook/y.db-shm", "a/b/c.db"} {
		if _, err := git("check-ignore", "-q", "--no-index", p); err != nil {
			t.Errorf("%s is not ignored: %v", p, err)
		}
	}
}
