package metrics

import "github.com/prometheus/client_golang/prometheus"

// ConsumerState is one queue source's consumer as a scrape reads it (the
// gateway makes it from broker.Status, which imports this package).
type ConsumerState struct {
	Source, Broker string
	Connected      bool
	InFlight       int64
	InFlightBytes  int64
}

// Consumers returns the collector of each queue source's connection and
// the messages it holds, read at each scrape.
func Consumers(read func() []ConsumerState) prometheus.Collector {
	return &consumers{
		read: read,
		connected: prometheus.NewDesc("oncehook_source_broker_connected",
			"Whether a queue source's consumer is connected to its broker (1) or not (0): it reconnects with backoff, and HTTP intake is unaffected.",
			[]string{"source", "broker"}, nil),
		inFlight: prometheus.NewDesc("oncehook_source_broker_in_flight",
			"Messages a queue source's consumer holds, handed out by the broker and not yet acknowledged.",
			[]string{"source", "broker"}, nil),
		inFlightBytes: prometheus.NewDesc("oncehook_source_broker_in_flight_bytes",
			"Bytes a queue source's messages hold of max_inflight_bytes: their bodies, from when the consumer takes them until their answer.",
			[]string{"source", "broker"}, nil),
	}
}

type consumers struct {
	read      func() []ConsumerState
	connected *prometheus.Desc
	inFlight  *prometheus.Desc
	// inFlightBytes: what they hold of intake's budget.
	inFlightBytes *prometheus.Desc
}

func (c *consumers) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.connected
	ch <- c.inFlight
	ch <- c.inFlightBytes
}

func (c *consumers) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.read() {
		v := 0.0
		if st.Connected {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.connected, prometheus.GaugeValue, v, st.Source, st.Broker)
		ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(st.InFlight), st.Source, st.Broker)
		ch <- prometheus.MustNewConstMetric(c.inFlightBytes, prometheus.GaugeValue, float64(st.InFlightBytes), st.Source, st.Broker)
	}
}
