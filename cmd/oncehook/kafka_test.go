package main_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/oncehook/oncehook/internal/testenv"
)

// Issue 27 and invariant 19 across a crash: a gateway consuming a Kafka
// topic (5,200 records: 4,000 distinct clicks and 1,200 re-published
// copies) is killed with -9 mid-stream and started again on the same store
// and group. The cluster runs in this test's process (franz-go's kfake),
// outside the gateway's. Every distinct key is delivered once, nothing is
// skipped, and the group's committed offsets reach the end: what the
// second process reads again is what the first had not committed, and it
// is a duplicate.
func TestKillNineMidStreamOnKafkaDeliversEachKeyOnce(t *testing.T) {
	const (
		distinct = 4000
		copies   = 1200
		parts    = 4
	)
	kc := testenv.NewKafka(t, parts, "clicks")
	rng := rand.New(rand.NewPCG(9, 27))
	var recs []*kgo.Record
	click := func(i int) *kgo.Record {
		return &kgo.Record{Topic: "clicks", Partition: int32(rng.IntN(parts)), Value: fmt.Appendf(nil, `{"click_id":"c%05d"}`, i)}
	}
	for i := range distinct {
		recs = append(recs, click(i))
	}
	for _, i := range rng.Perm(distinct)[:copies] {
		recs = append(recs, click(i))
	}
	rng.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
	kc.Produce(t, recs[:1000]...)

	dir := t.TempDir()
	sink := newOKSink(t) // holds every delivery until it opens
	cfg := filepath.Join(dir, "oncehook.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`listen: 127.0.0.1:0
store: sqlite://./events.db
delivery:
  lease: 4s
sources:
  - name: clicks
    consume: {kafka: {brokers: [%s], topic: clicks, group: oncehook, max_in_flight: 128, session_timeout: 6s}}
    key: ["json:click_id"]
    destinations: [app]
destinations:
  - name: app
    url: %s
    timeout: 3s
    retry: {max_attempts: 20, base_delay: 50ms, max_delay: 200ms}
`, strings.Join(kc.Addrs, ", "), sink.URL)), 0o600); err != nil {
		t.Fatal(err)
	}

	p := startProcess(t, dir, "--config", cfg)
	// The rest streams in while the gateway consumes, is killed, and is
	// down.
	produced := make(chan error, 1)
	go func() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(kc.Addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			produced <- err
			return
		}
		defer cl.Close()
		for rest := recs[1000:]; len(rest) > 0; {
			n := min(100, len(rest))
			if err := cl.ProduceSync(context.Background(), rest[:n]...).FirstErr(); err != nil {
				produced <- err
				return
			}
			rest = rest[n:]
			time.Sleep(40 * time.Millisecond)
		}
		produced <- nil
	}()
	taken := func(p *process) int {
		a, _ := strconv.ParseFloat(metric(t, p.URL, `oncehook_events_total{source="clicks",verdict="accepted"}`), 64)
		d, _ := strconv.ParseFloat(metric(t, p.URL, `oncehook_events_total{source="clicks",verdict="duplicate"}`), 64)
		return int(a + d)
	}
	// Killed once some of its claims are committed to the group, long
	// before all of them.
	var before map[int32]int64
	var committedBefore int64
	if !testenv.WaitFor(30*time.Second, func() bool {
		if taken(p) < 1000 {
			return false
		}
		before, committedBefore = kc.Committed(t, "oncehook", "clicks"), 0
		for _, o := range before {
			committedBefore += o
		}
		return committedBefore > 0
	}) {
		t.Fatalf("the first process took %d of %d records and committed %v; stderr:\n%s", taken(p), len(recs), before, p.stderr)
	}
	claimedBefore := taken(p)
	p.kill()
	if committedBefore >= int64(len(recs)) {
		t.Fatalf("everything was committed before the kill (%v): the crash came too late to test anything", before)
	}

	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	sink.open.Store(true)
	p2 := startProcess(t, dir, "--config", cfg)
	defer p2.kill()
	if !testenv.WaitFor(60*time.Second, func() bool { return len(sink.delivered()) == distinct }) {
		t.Fatalf("after the restart %d of %d keys delivered; stderr:\n%s", len(sink.delivered()), distinct, p2.stderr)
	}
	var after map[int32]int64
	if !testenv.WaitFor(20*time.Second, func() bool {
		after = kc.Committed(t, "oncehook", "clicks")
		var sum int64
		for _, o := range after {
			sum += o
		}
		return sum == int64(len(recs))
	}) {
		t.Fatalf("committed offsets %v after the restart; want the %d records", after, len(recs))
	}
	time.Sleep(300 * time.Millisecond) // a late second delivery would show
	for key, n := range sink.delivered() {
		if n != 1 || !strings.HasPrefix(key, "clicks:c") {
			t.Errorf("%s delivered %d times; want once", key, n)
		}
	}
	again := taken(p2)
	dup, _ := strconv.ParseFloat(metric(t, p2.URL, `oncehook_events_total{source="clicks",verdict="duplicate"}`), 64)
	t.Logf("killed with %d records claimed (or more) and %d committed; the second process took %d, %v of them duplicates",
		claimedBefore, committedBefore, again, dup)
	if again < len(recs)-int(committedBefore) {
		t.Errorf("the second process took %d records; want at least the %d the first had not committed", again, int64(len(recs))-committedBefore)
	}
}
