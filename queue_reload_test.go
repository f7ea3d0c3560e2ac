package oncehook_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/internal/testenv/brokertest"
	"github.com/oncehook/oncehook/oncehooktest"
)

// A queue destination's publish: block is read at a reload as a URL is:
// a new subject takes the next events there (the destination's publisher
// is built anew, the old one closed), and a reload that leaves the block as
// it was keeps publishing, each event once.
func TestAReloadTakesAQueueDestinationsNewSubject(t *testing.T) {
	url := testenv.NATS(t)
	js, stream, prefix := brokertest.NATSStream(t, url, jetstream.MemoryStorage)
	dir := t.TempDir()
	yaml := func(subject, note string) string {
		return `
store: sqlite://` + dir + `/oncehook.db
sources:
  - {name: stripe, preset: stripe, secrets: [whsec_test], destinations: [bus]}
destinations:
  - name: bus
    publish: {nats: {url: ` + url + `, subject: "` + prefix + `.` + subject + `.{type}"}}   # ` + note + `
`
	}
	gw := oncehooktest.Start(t, yaml("first", ""))
	send := func(id string) {
		t.Helper()
		body := fmt.Sprintf(`{"id":%q,"object":"event","type":"invoice.paid"}`, id)
		resp, err := http.DefaultClient.Do(testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", "whsec_test", []byte(body), ""))
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %v %v", id, resp, err)
		}
		resp.Body.Close()
	}
	delivered := func(n int64) {
		t.Helper()
		if !testenv.WaitFor(10*time.Second, func() bool { st, _ := gw.Store().Stats(context.Background()); return st.Delivered == n }) {
			st, _ := gw.Store().Stats(context.Background())
			t.Fatalf("stats %+v, want %d delivered", st, n)
		}
	}
	reload := func(text string) {
		t.Helper()
		cfg, err := config.Parse([]byte(text), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		if _, err := gw.Reload(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
	}
	send("evt_1")
	delivered(1)
	reload(yaml("second", ""))
	send("evt_2")
	delivered(2)
	reload(yaml("second", "the same block, another comment"))
	send("evt_3")
	delivered(3)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"stripe:evt_1": prefix + ".first.invoice.paid", "stripe:evt_2": prefix + ".second.invoice.paid", "stripe:evt_3": prefix + ".second.invoice.paid"}
	info, err := s.Info(ctx)
	if err != nil || info.State.Msgs != uint64(len(want)) {
		t.Fatalf("the stream holds %+v (%v), want %d messages", info.State, err, len(want))
	}
	for seq := uint64(1); seq <= info.State.Msgs; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		id := m.Header.Get("Nats-Msg-Id")
		if want[id] != m.Subject {
			t.Errorf("%s published to %q, want %q", id, m.Subject, want[id])
		}
		delete(want, id)
	}
}
