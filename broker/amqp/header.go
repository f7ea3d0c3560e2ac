package amqp

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/oncehook/oncehook/broker"
)

// headerOf is a delivery's header fields and properties as HTTP headers,
// under canonical keys: what the source's key and type rules, its preset
// and the forwarded routing headers read. A property wins over a header
// field of the same name.
func headerOf(d *amqp.Delivery) http.Header {
	h := make(http.Header, len(d.Headers)+4)
	for k, v := range d.Headers {
		for _, s := range fieldValues(v) {
			h.Add(http.CanonicalHeaderKey(k), s)
		}
	}
	for _, p := range [...]struct{ name, value string }{
		{"Content-Type", d.ContentType},
		{"Content-Encoding", d.ContentEncoding},
		{"Message-Id", d.MessageId},
		{"Correlation-Id", d.CorrelationId},
		{"Amqp-Type", d.Type},
		{"Amqp-App-Id", d.AppId},
		{"Amqp-Exchange", d.Exchange},
		{"Amqp-Routing-Key", d.RoutingKey},
	} {
		if p.value != "" {
			h.Set(p.name, p.value)
		}
	}
	broker.DefaultContentType(h, d.Body)
	return h
}

// enqueued is when the broker took d, as far as d says: RabbitMQ stamps
// nothing by default. With its incoming timestamp interceptor
// (message_interceptors.incoming.set_header_timestamp.overwrite in
// rabbitmq.conf, RabbitMQ 3.12 and later; the rabbitmq_message_timestamp
// plugin before) a message carries the broker's clock in the
// timestamp_in_ms header (milliseconds) and the timestamp property
// (seconds); without it, the timestamp property is whatever the
// publisher set, if anything. Zero: neither, and a signature's age is
// measured against when the message is consumed.
func enqueued(d *amqp.Delivery) time.Time {
	var ms int64
	switch v := d.Headers["timestamp_in_ms"].(type) {
	case int64:
		ms = v
	case int32:
		ms = int64(v)
	case int:
		ms = int64(v)
	case uint64:
		ms = int64(v)
	case time.Time:
		ms = v.UnixMilli()
	}
	if ms > 0 {
		return time.UnixMilli(ms)
	}
	if !d.Timestamp.IsZero() && d.Timestamp.Unix() > 0 {
		return d.Timestamp
	}
	return time.Time{}
}

// fieldValues is an AMQP field value as header values: text as it is,
// numbers and booleans as Go prints them, a timestamp in RFC 3339, an
// array as one value per element. A nested table has no header form and
// is left out.
func fieldValues(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []byte:
		return []string{string(v)}
	case bool:
		return []string{strconv.FormatBool(v)}
	case int8, int16, int32, int64, int, uint8, uint16, uint32, uint64, float32, float64:
		return []string{fmt.Sprint(v)}
	case time.Time:
		return []string{v.UTC().Format(time.RFC3339)}
	case amqp.Decimal:
		s := strconv.FormatInt(int64(v.Value), 10)
		if v.Scale > 0 {
			neg := strings.HasPrefix(s, "-")
			s = strings.TrimPrefix(s, "-")
			for len(s) <= int(v.Scale) {
				s = "0" + s
			}
			s = s[:len(s)-int(v.Scale)] + "." + s[len(s)-int(v.Scale):]
			if neg {
				s = "-" + s
			}
		}
		return []string{s}
	case []any:
		var out []string
		for _, e := range v {
			out = append(out, fieldValues(e)...)
		}
		return out
	}
	return nil
}

// tableOf is a delivery's headers as a publish's header fields: one text
// field per header, its values joined as HTTP joins them.
func tableOf(h http.Header) amqp.Table {
	t := make(amqp.Table, len(h))
	for k, vs := range h {
		if len(vs) == 0 {
			continue
		}
		t[k] = strings.Join(vs, ", ")
	}
	return t
}
