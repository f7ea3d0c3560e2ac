package testenv

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// BuildOncehook builds the oncehook binary from pkg (cmd/oncehook's path
// from the calling package's directory) into a temporary directory, for a
// TestMain whose tests run it as a user does; remove deletes it. The
// build's output goes to stderr.
func BuildOncehook(pkg string) (binary string, remove func(), err error) {
	dir, err := os.MkdirTemp("", "oncehook-bin")
	if err != nil {
		return "", nil, err
	}
	binary = filepath.Join(dir, "oncehook")
	build := exec.Command("go", "build", "-o", binary, pkg)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return binary, func() { os.RemoveAll(dir) }, nil
}

// SourceTotal is the total /v1/stats gives for source (accepted,
// duplicate, republished, ...), asked of the API at api with token.
func SourceTotal(t testing.TB, api, token, source string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, api+"/v1/stats?source="+source, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var view struct {
		Sources []struct {
			Total map[string]any `json:"total"`
		} `json:"sources"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&view); err != nil || len(view.Sources) != 1 {
		t.Fatalf("stats of %s: %+v %v", source, view, err)
	}
	return view.Sources[0].Total
}
