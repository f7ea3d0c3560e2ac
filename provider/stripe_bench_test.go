package provider

import "testing"

// stripeInvoicePaid is a Stripe event as Stripe sends it: many short
// members, nested objects and arrays, nulls and numbers (2.4 KB).
const stripeInvoicePaid = `{
  "id": "evt_1OaBcDEFghIJklMNopQRstUV",
  "object": "event",
  "api_version": "2023-10-16",
  "created": 1700000000,
  "data": {
    "object": {
      "id": "in_1OaBcDEFghIJklMN",
      "object": "invoice",
      "account_country": "US",
      "account_name": "Example, Inc.",
      "amount_due": 2000,
      "amount_paid": 2000,
      "amount_remaining": 0,
      "attempt_count": 1,
      "attempted": true,
      "billing_reason": "subscription_cycle",
      "charge": "ch_3OaBcDEFghIJklMN0abcdEFG",
      "collection_method": "charge_automatically",
      "currency": "usd",
      "customer": "cus_PQrsTUvwXYz123",
      "customer_email": "jenny.rosen@example.com",
      "customer_name": "Jenny Rosen",
      "customer_tax_exempt": "none",
      "customer_tax_ids": [],
      "default_payment_method": null,
      "description": null,
      "discount": null,
      "discounts": [],
      "hosted_invoice_url": "https://invoice.stripe.com/i/acct_1Abc/test_YWNjdF8xQWJj",
      "lines": {
        "object": "list",
        "data": [
          {
            "id": "il_1OaBcDEFghIJklMN",
            "object": "line_item",
            "amount": 2000,
            "currency": "usd",
            "description": "1 × Pro plan (at $20.00 / month)",
            "discountable": true,
            "livemode": false,
            "metadata": {},
            "period": {"end": 1702592000, "start": 1700000000},
            "plan": {"id": "price_1OaBc", "object": "plan", "active": true, "amount": 2000, "interval": "month", "interval_count": 1},
            "proration": false,
            "quantity": 1,
            "type": "subscription"
          }
        ],
        "has_more": false,
        "total_count": 1,
        "url": "/v1/invoices/in_1OaBcDEFghIJklMN/lines"
      },
      "livemode": false,
      "metadata": {},
      "number": "ABCD1234-0002",
      "paid": true,
      "period_end": 1700000000,
      "period_start": 1697408000,
      "status": "paid",
      "status_transitions": {"finalized_at": 1700003600, "paid_at": 1700003700, "voided_at": null},
      "subscription": "sub_1OaBcDEFghIJklMN",
      "subtotal": 2000,
      "tax": null,
      "total": 2000,
      "total_tax_amounts": [],
      "webhooks_delivered_at": 1700000100
    }
  },
  "livemode": false,
  "pending_webhooks": 1,
  "request": {"id": null, "idempotency_key": null},
  "type": "invoice.paid"
}`

// BenchmarkStripeItems reads a real-shaped event's id and type: by the
// one-pass walk (Items) and by encoding/json (stripeDecoded, the way
// before it).
func BenchmarkStripeItems(b *testing.B) {
	body := []byte(stripeInvoicePaid)
	for _, c := range []struct {
		name  string
		items func([]byte) ([]Item, error)
	}{
		{"walk", func(body []byte) ([]Item, error) { return (&stripe{}).Items(&Request{Body: body}) }},
		{"decode", stripeDecoded},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if items, err := c.items(body); err != nil || items[0].Key != "evt_1OaBcDEFghIJklMNopQRstUV" || items[0].Type != "invoice.paid" {
					b.Fatal(items, err)
				}
			}
		})
	}
}
