package oncehook

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/internal/transform"
)

// A tenant's destination spends what every tenant shares: the worker's
// slots, its lease, and the CPU and memory its script runs in. So a
// tenant's token may not set a destination's settings past the bounds
// below (the defaults): a script given 30 s and 64 GiB, with a slot of
// its own for each of delivery.concurrency's attempts, would hold the
// gateway for every other customer. The operator (the file, or a token
// with no tenant) may set anything, for a tenant's object too; a
// tenant's PATCH that keeps what the operator set is not refused for it;
// and the file's tenants: [{name, limits}] raises a tenant's bounds.

// tenantBound is one destination setting a tenant's token may not raise.
type tenantBound struct {
	// field is the setting as the API names it.
	field string
	// given is d's value (0: unset, the default).
	given func(d *config.Destination) int64
	// bound is the most a tenant may set in c, the running config,
	// unless raised.
	bound func(c *config.Config, d *config.Destination) int64
	// raised is the tenant's own bound in the file's tenants: (0: none).
	raised func(l *config.TenantLimits) int64
	// show writes a value as the config file would.
	show func(int64) string
}

// tenantBounds are the settings a tenant's token may not raise, one row
// each: where a new one belongs.
var tenantBounds = []tenantBound{
	{"timeout", // an attempt holds a slot, and the lease of every destination covers the longest
		func(d *config.Destination) int64 { return int64(d.Timeout) },
		func(_ *config.Config, d *config.Destination) int64 {
			if d.Pull != nil {
				return int64(config.DefaultPullTimeout)
			}
			return int64(config.DefaultTimeout)
		}, func(l *config.TenantLimits) int64 { return int64(l.Timeout) }, showDuration},
	{"concurrency", // unset, a destination beside others has three quarters of the slots
		func(d *config.Destination) int64 { return int64(d.Concurrency) },
		func(c *config.Config, _ *config.Destination) int64 {
			return int64(sharedConcurrency(c.Delivery.Concurrency))
		}, func(l *config.TenantLimits) int64 { return int64(l.Concurrency) }, showCount},
	{"retry.max_attempts", // each attempt is a send, and a script's run
		func(d *config.Destination) int64 { return int64(d.Retry.MaxAttempts) },
		func(*config.Config, *config.Destination) int64 { return config.DefaultMaxAttempts }, func(l *config.TenantLimits) int64 { return int64(l.Retry.MaxAttempts) }, showCount},
	{"transform.timeout",
		func(d *config.Destination) int64 {
			return transformValue(d, func(t *config.Transform) int64 { return int64(t.Timeout) })
		},
		func(*config.Config, *config.Destination) int64 { return int64(transform.DefaultTimeout) }, func(l *config.TenantLimits) int64 { return int64(l.Transform.Timeout) }, showDuration},
	{"transform.max_memory",
		func(d *config.Destination) int64 {
			return transformValue(d, func(t *config.Transform) int64 { return int64(t.MaxMemory) })
		},
		func(*config.Config, *config.Destination) int64 { return transform.DefaultMaxMemory }, func(l *config.TenantLimits) int64 { return int64(l.Transform.MaxMemory) }, showSize},
	{"transform.max_output",
		func(d *config.Destination) int64 {
			return transformValue(d, func(t *config.Transform) int64 { return int64(t.MaxOutput) })
		},
		func(*config.Config, *config.Destination) int64 { return transform.DefaultMaxOutput }, func(l *config.TenantLimits) int64 { return int64(l.Transform.MaxOutput) }, showSize},
}

func transformValue(d *config.Destination, v func(*config.Transform) int64) int64 {
	if d.Transform == nil {
		return 0
	}
	return v(d.Transform)
}

// overTenantBounds refuses each of d's settings past its bound in c, as
// given by tenant's token; old, when not nil, is the destination before a
// PATCH, whose values (the operator's) stay allowed.
func overTenantBounds(c *config.Config, tenant string, d, old *config.Destination) error {
	var limits config.TenantLimits
	if i := slices.IndexFunc(c.Tenants, func(t config.Tenant) bool { return t.Name == tenant }); i >= 0 {
		limits = c.Tenants[i].Limits
	}
	var errs []error
	for _, b := range tenantBounds {
		v, bound := b.given(d), max(b.bound(c, d), b.raised(&limits))
		if v <= bound || (old != nil && v <= b.given(old)) {
			continue
		}
		errs = append(errs, fmt.Errorf("%s: %s is above what a tenant's token may set, %s (tenant %s's destinations share the gateway with every other's): the operator may set more, in the config file or with a token of no tenant, or raise tenant %s's bound (tenants: [{name: %s, limits: {%s}}])",
			b.field, b.show(v), b.show(bound), tenant, tenant, tenant, limitsPath(b.field)))
	}
	return errors.Join(errs...)
}

// limitsPath is field as tenants[].limits writes it: "timeout: ...",
// "retry: {max_attempts: ...}".
func limitsPath(field string) string {
	parent, name, nested := strings.Cut(field, ".")
	if !nested {
		return field + ": ..."
	}
	return parent + ": {" + name + ": ...}"
}

func showDuration(v int64) string { return time.Duration(v).String() }

func showCount(v int64) string { return strconv.FormatInt(v, 10) }

// showSize writes v as ByteSize reads it: GiB, MiB, KiB or bytes.
func showSize(v int64) string {
	for _, u := range []struct {
		name string
		n    int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if v >= u.n && v%u.n == 0 {
			return strconv.FormatInt(v/u.n, 10) + u.name
		}
	}
	return strconv.FormatInt(v, 10)
}
