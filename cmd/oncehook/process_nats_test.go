package main_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/oncehook/oncehook/internal/testenv"
)

// Invariant 19 through kill -9: a gateway consuming a NATS stream of
// 10,000 messages (7,000 orders, 3,000 re-published copies) is killed
// mid-stream and started again. What JetStream redelivers is what was not
// acked: not yet committed (taken now), or committed and not acked (a
// duplicate). Every order reaches the destination exactly once and every
// message ends acked: nothing was acked before its commit.
func TestKillNineWhileConsumingNATSLosesNothing(t *testing.T) {
	url := testenv.NATS(t)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	var b [5]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	stream, subject := "KILL"+strings.ToUpper(id), "kill"+id
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject + ".>"}, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { js.DeleteStream(context.Background(), stream) })

	const distinct, copies = 7000, 3000
	total := 0
	for i := range distinct {
		body := []byte(fmt.Sprintf(`{"order_id":"o-%05d"}`, i))
		for range 1 + boolInt(i%7 < 3) { // 3 in 7 twice: 3,000 copies
			if _, err := js.PublishAsync(subject+".orders", body); err != nil {
				t.Fatal(err)
			}
			total++
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("publishes not acked")
	}
	if total != distinct+copies {
		t.Fatalf("published %d", total)
	}

	dir := t.TempDir()
	sink := newOKSink(t)
	sink.open.Store(true)
	cfg := filepath.Join(dir, "oncehook.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`listen: 127.0.0.1:0
store: sqlite://./events.db
delivery: {lease: 4s}
sources:
  - name: orders
    consume: {nats: {url: %s, stream: %s, subject: "%s.>", ack_wait: 3s}}
    key: ["json:order_id"]
    destinations: [app]
destinations:
  - {name: app, url: %s, timeout: 3s, retry: {max_attempts: 20, base_delay: 50ms, max_delay: 200ms}}
`, url, stream, subject, sink.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	cons := func() *jetstream.ConsumerInfo {
		c, err := js.Consumer(ctx, stream, "oncehook-orders")
		if err != nil {
			return &jetstream.ConsumerInfo{}
		}
		info, err := c.Info(ctx)
		if err != nil {
			return &jetstream.ConsumerInfo{}
		}
		return info
	}
	// Hold the destination until the kill: a delivery it answered before
	// then may be repeated after (its outcome died with the process),
	// and that is invariant 6's test, not this one's.
	sink.open.Store(false)
	p := startProcess(t, dir, "--config", cfg)
	if !testenv.WaitFor(20*time.Second, func() bool { return cons().AckFloor.Stream >= uint64(total/4) }) {
		t.Fatalf("the gateway did not get a quarter through the stream: %+v\nstderr: %s", cons(), p.stderr)
	}
	p.kill()
	at := cons()
	if at.AckFloor.Stream >= uint64(total) {
		t.Fatalf("killed after the whole stream was acked (%+v): not mid-stream", at)
	}
	t.Logf("killed with %d of %d acked, %d unacked in flight", at.AckFloor.Stream, total, at.NumAckPending)

	sink.open.Store(true)
	p2 := startProcess(t, dir, "--config", cfg)
	// What was in flight comes back after the ack wait (3 s here), the
	// deliveries the dead process held after their lease (4 s); the rest
	// of the stream flows at once.
	if !testenv.WaitFor(60*time.Second, func() bool {
		info := cons()
		return len(sink.delivered()) == distinct && info.AckFloor.Stream == uint64(total) && info.NumAckPending == 0
	}) {
		t.Fatalf("after the restart: %d of %d orders delivered, consumer %+v\nstderr: %s", len(sink.delivered()), distinct, cons(), p2.stderr)
	}
	time.Sleep(300 * time.Millisecond)
	for key, n := range sink.delivered() {
		if n != 1 {
			t.Errorf("%s delivered %d times", key, n)
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
