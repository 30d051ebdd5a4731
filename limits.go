package surgepay

import "time"

// Limits in one place. Crossing one is a typed error or backpressure, never
// unbounded growth. Operators change the configurable ones in the config file;
// these are the defaults and the hard ceilings.
const (
	// AmountMinorMax is the largest amount accepted, in minor units. It keeps
	// amount+tax and sums of refunds far from int64 overflow and matches the
	// 8-digit-major ceiling common at card networks (99,999,999.99 in a
	// 2-decimal currency).
	AmountMinorMax int64 = 9_999_999_999

	// RequestBodyBytesMax bounds every request body.
	RequestBodyBytesMax = 64 << 10
	// ProcessorEventBytesMax bounds a processor's webhook body (a Stripe
	// event carries its whole object; they run to tens of KiB).
	ProcessorEventBytesMax = 512 << 10

	// MetadataKeysMax, MetadataKeyBytesMax and MetadataValueBytesMax bound metadata.
	MetadataKeysMax       = 20
	MetadataKeyBytesMax   = 40
	MetadataValueBytesMax = 500

	// TextBytesMax bounds names, emails and descriptions.
	TextBytesMax = 1000

	// TaxFieldBytesMax bounds each field of a payment's tax location
	// (country, region, postal code, category), which the payment stores.
	TaxFieldBytesMax = 64

	// IdempotencyKeyBytesMax bounds the Idempotency-Key header.
	IdempotencyKeyBytesMax = 255

	// IdempotencyRetentionMin is the shortest configurable retention of
	// idempotency records; IdempotencyRetentionDefault the default.
	IdempotencyRetentionMin     = 24 * time.Hour
	IdempotencyRetentionDefault = 24 * time.Hour

	// ListLimitMax and ListLimitDefault bound a page of a list.
	ListLimitMax     = 100
	ListLimitDefault = 10

	// RefundsPerPaymentMax bounds how many refunds one payment may carry,
	// which bounds the size of its row and of its transaction list.
	RefundsPerPaymentMax = 50

	// ReconcileAttemptsMax bounds lookups of an unknown provider outcome
	// within one request before the payment is left in processing.
	ReconcileAttemptsMax = 3

	// WebhookEndpointsPerMerchantMax bounds a merchant's webhook endpoints:
	// each costs a request per payment change, and the list is one page.
	WebhookEndpointsPerMerchantMax = 16
	// WebhookURLBytesMax bounds a webhook endpoint's URL.
	WebhookURLBytesMax = 2048
	// WebhookSecretOverlapMax bounds how long a rolled webhook secret
	// keeps signing deliveries beside its successor (expires_in);
	// WebhookSecretOverlapDefault is the default, as Stripe's.
	WebhookSecretOverlapMax     = 7 * 24 * time.Hour
	WebhookSecretOverlapDefault = 24 * time.Hour
	// WebhookResendsMax bounds the resends of one delivery, so that a
	// script resending in a loop cannot flood an endpoint.
	WebhookResendsMax = 10
	// WebhookFailingStreak is the failed attempts in a row after which an
	// endpoint is failing: its health says so, and each dispatcher sends
	// it one delivery at a time until an attempt succeeds.
	WebhookFailingStreak = 5

	// AnalyticsDaysMax bounds the days one analytics query spans (a year,
	// leap day included), which bounds its answer: one row per day and
	// currency.
	AnalyticsDaysMax = 366

	// RecentPaymentMethodsPageMax bounds one ListRecentPaymentMethods: a
	// page of the preheat at start, which pages through a merchant's cards.
	RecentPaymentMethodsPageMax = 1000
)
