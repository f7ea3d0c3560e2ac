// Package purchases is a config and one transformation, not a program:
// Hotmart's PURCHASE_APPROVED and Kiwify's order_approved, unified by
// transforms/capi.js into one Meta Conversions API Purchase per order, with
// event_id = the order id. Its test runs them through a real gateway.
//
//	HOTMART_HOTTOK=... KIWIFY_TOKEN=... META_PIXEL=... META_TOKEN=... \
//	oncehook serve --config examples/purchases/oncehook.yaml
package purchases
