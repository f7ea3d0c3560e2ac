package provider_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/oncehook/oncehook/provider"
)

// Verify a Stripe request and take its event key, with the test vector from
// providers.md.
func ExampleNew() {
	stripe, err := provider.New("stripe", provider.Options{Secrets: []string{"whsec_test_stripe_secret"}})
	if err != nil {
		panic(err)
	}
	req := &provider.Request{
		Header: http.Header{"Stripe-Signature": {"t=1700000000,v1=bce9a00f758174fb9cfd3d82017e3ec7737916b93f0dd1a7b3278e0ff974fd7e"}},
		Body:   []byte(`{"id":"evt_test_001","object":"event","type":"payment_intent.succeeded"}`),
	}
	fmt.Println("at the time it was signed:", stripe.Verify(req, time.Unix(1700000010, 0)))
	fmt.Println("an hour later:", stripe.Verify(req, time.Unix(1700003600, 0)))
	items, _ := stripe.Items(req)
	fmt.Println("key:", items[0].Key)
	// Output:
	// at the time it was signed: <nil>
	// an hour later: signature rejected: timestamp is 1h0m0s old, beyond the 5m0s tolerance
	// key: evt_test_001
}

// Sign a payload exactly as GitHub does, e.g. to replay a delivery locally.
func ExamplePreset_sign() {
	github, _ := provider.New("github", provider.Options{Secrets: []string{"It's a Secret to Everybody"}})
	req := &provider.Request{Header: http.Header{}, Body: []byte("Hello, World!")}
	github.Sign(req, "It's a Secret to Everybody", time.Now(), "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	fmt.Println(req.Header.Get("X-Hub-Signature-256"))
	// Output:
	// sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17
}
