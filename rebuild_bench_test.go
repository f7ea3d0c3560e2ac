package oncehook

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/config"
)

// BenchmarkCheckAndBuildMany is what every change through the API costs
// before its swap: the whole config checked and its parts built (the
// transformations aside: a rebuild reuses the unchanged ones), at 2,000
// and 20,000 sources and destinations.
func BenchmarkCheckAndBuildMany(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("objects=%d", 2*n), func(b *testing.B) {
			var s, d strings.Builder
			for i := range n {
				fmt.Fprintf(&s, "  - {name: s%05d, preset: stripe, secrets: [whsec_x], destinations: [d%05d]}\n", i, i)
				fmt.Fprintf(&d, "  - {name: d%05d, url: \"http://127.0.0.1:9/d%05d\"}\n", i, i)
			}
			text := "store: sqlite://" + filepath.Join(b.TempDir(), "a.db") + "\nsources:\n" + s.String() + "destinations:\n" + d.String()
			cfg, err := config.Parse([]byte(text), func(string) (string, bool) { return "", false })
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				p, err := compile(cfg, testKinds())
				if err != nil {
					b.Fatal(err)
				}
				p.close()
			}
		})
	}
}
