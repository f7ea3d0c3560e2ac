package testenv

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Kafka is an in-process Kafka cluster (franz-go's kfake: there is no
// Kafka broker on this machine, nor in CI) that a test can cut off and
// bring back. A TCP proxy cannot stand in front of Kafka (clients connect
// to the addresses the brokers advertise), so the cut is in the brokers'
// own listeners: while cut, every connection is closed and new ones are
// hung up at once, and the cluster keeps its topics, records and groups.
type Kafka struct {
	*kfake.Cluster
	Addrs []string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]bool
}

// NewKafka starts a one-broker cluster with each topic created with parts
// partitions; it is closed when the test ends.
func NewKafka(t testing.TB, parts int32, topics ...string) *Kafka {
	t.Helper()
	k := &Kafka{conns: map[net.Conn]bool{}}
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.ListenFn(k.listen)}
	if len(topics) > 0 {
		opts = append(opts, kfake.SeedTopics(parts, topics...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	k.Cluster, k.Addrs = c, c.ListenAddrs()
	t.Cleanup(c.Close)
	return k
}

// Cut makes the cluster unreachable: open connections are closed and new
// ones hung up, until Restore.
func (k *Kafka) Cut() {
	k.mu.Lock()
	k.down = true
	open := make([]net.Conn, 0, len(k.conns))
	for c := range k.conns {
		open = append(open, c)
	}
	clear(k.conns)
	k.mu.Unlock()
	for _, c := range open {
		c.Close()
	}
}

// Restore makes the cluster reachable again.
func (k *Kafka) Restore() {
	k.mu.Lock()
	k.down = false
	k.mu.Unlock()
}

func (k *Kafka) listen(network, addr string) (net.Listener, error) {
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, err
	}
	return &cutListener{Listener: ln, k: k}, nil
}

type cutListener struct {
	net.Listener
	k *Kafka
}

func (l *cutListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.k.mu.Lock()
		if l.k.down {
			l.k.mu.Unlock()
			c.Close()
			continue
		}
		tc := &trackedConn{Conn: c, k: l.k}
		l.k.conns[tc] = true
		l.k.mu.Unlock()
		return tc, nil
	}
}

type trackedConn struct {
	net.Conn
	k    *Kafka
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.k.mu.Lock()
		delete(c.k.conns, c)
		c.k.mu.Unlock()
	})
	return c.Conn.Close()
}

// Produce writes recs and waits for their acks.
func (k *Kafka) Produce(t testing.TB, recs ...*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// Committed is group's committed offset per partition of topic, as an
// operator reads it (kadm): the offset a new member starts from.
func (k *Kafka) Committed(t testing.TB, group, topic string) map[int32]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetch offsets: %v", err)
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil {
			out[o.Partition] = o.At
		}
	})
	return out
}
