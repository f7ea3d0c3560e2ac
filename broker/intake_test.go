package broker_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/oncehook/oncehook/broker"
	"github.com/oncehook/oncehook/receive"
)

// One verdict for every consumer (issue 42): committed is an ack; what the
// store, memory or the running config could not take now is left for the
// broker to hand out again (an unknown source too: the message is fine,
// the config lacks its source, and NATS and Kafka once threw it away as
// poison); what no retry would make acceptable is poison.
func TestEveryConsumerDecidesTheSameVerdict(t *testing.T) {
	rej := func(status int, reason string) error {
		return &receive.Rejection{Status: status, Reason: reason, Detail: reason}
	}
	for _, c := range []struct {
		err  error
		want broker.Verdict
	}{
		{nil, broker.Ack},
		{rej(http.StatusServiceUnavailable, receive.ReasonUnavailable), broker.Retry},
		{rej(http.StatusServiceUnavailable, receive.ReasonOverloaded), broker.Retry},
		{rej(http.StatusNotFound, receive.ReasonUnknownSource), broker.Retry},
		{errors.New("context deadline exceeded"), broker.Retry},
		{rej(http.StatusUnprocessableEntity, receive.ReasonMissingKey), broker.Poison},
		{rej(http.StatusBadRequest, receive.ReasonMalformed), broker.Poison},
		{rej(http.StatusRequestEntityTooLarge, receive.ReasonTooLarge), broker.Poison},
		{rej(http.StatusUnauthorized, receive.ReasonSignature), broker.Poison},
	} {
		if got := broker.Decide(c.err); got.Verdict != c.want {
			t.Errorf("%v: verdict %d, want %d", c.err, got.Verdict, c.want)
		}
	}
}
