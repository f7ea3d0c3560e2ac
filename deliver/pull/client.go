package pull

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/oncehook/oncehook/internal/jsonhttp"
)

// Client is a consumer of the pull protocol over HTTP (`oncehook
// listen` is one): a pull, then an ack per delivery.
type Client struct {
	c *jsonhttp.Client
}

// NewClient is a consumer of the API at base with token (a consumer's
// token, pull: [...], or one that may change anything). hc must let a
// request last the pull's wait (nil: no timeout but ctx's).
func NewClient(base, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{}
	}
	return &Client{c: jsonhttp.NewClient(base, token, hc)}
}

// APIError is an error answer of the pull protocol.
type APIError struct {
	Status int
	Body   jsonhttp.Error
}

func (e *APIError) Error() string {
	return fmt.Sprintf("HTTP %d: %s (%s)", e.Status, e.Body.Error, e.Body.Reason)
}

// Pull leases up to b.Max of destination's deliveries, waiting up to
// b.Wait for the first.
func (c *Client) Pull(ctx context.Context, destination string, b PullBody) ([]WireDelivery, error) {
	var out PullAnswer
	if err := c.do(ctx, "/v1/destinations/"+url.PathEscape(destination)+"/pull", b, &out); err != nil {
		return nil, err
	}
	return out.Deliveries, nil
}

// Ack ends the lease of delivery id with the consumer's outcome.
func (c *Client) Ack(ctx context.Context, id string, b AckBody) (AckAnswer, error) {
	var out AckAnswer
	err := c.do(ctx, "/v1/deliveries/"+url.PathEscape(id)+"/ack", b, &out)
	return out, err
}

func (c *Client) do(ctx context.Context, path string, body, out any) error {
	status, data, err := c.c.Do(ctx, http.MethodPost, path, nil, body)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		e := &APIError{Status: status}
		if json.Unmarshal(data, &e.Body) != nil {
			e.Body.Error = string(data)
		}
		return e
	}
	return json.Unmarshal(data, out)
}
