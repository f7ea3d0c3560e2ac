package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/mail"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/oncehook/oncehook/internal/egress"
	"github.com/oncehook/oncehook/internal/lease"
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// IsName reports whether s is a valid name of a source, destination,
// token or API (the check reports one that is not).
func IsName(s string) bool { return nameRE.MatchString(s) }

// checkHeaders checks headers sent with every request (a destination's,
// the alerts'): a name that is not a token, or a value with a control
// character other than the tab (a line break, a NUL), cannot be sent:
// Go's client refuses the request, so every attempt would fail, the
// breaker would hold the destination, and nothing would reach it.
func checkHeaders(f string, h map[string]string, fail failFunc) {
	for _, name := range slices.Sorted(maps.Keys(h)) {
		if !httpguts.ValidHeaderFieldName(name) {
			fail(f, "%q: not a header name", name)
			continue
		}
		if !httpguts.ValidHeaderFieldValue(h[name]) {
			fail(f, "%s: its value has a control character (a CR, LF, NUL or another, which HTTP does not allow)", name)
		}
	}
}

// Validate checks the configuration field by field and names the field at
// fault. What only the parts and the kinds a build has can say (a source's
// preset, a filter, a transformation, a broker's settings, the store's
// URL) is ValidateWith's.
func (c *Config) Validate() error { return c.ValidateWith(nil) }

// FailFunc reports a field at fault: fail("sources[0].window", "must be
// positive").
type FailFunc = func(field, format string, args ...any)

// A Checker checks what config cannot say alone, as a build has it: the
// kinds a config names (a broker reads and checks its own block, a store
// kind its URL) and the parts it builds (that a source's preset takes its
// options, that its order's rules and its destinations' filters compile,
// that a transformation compiles), filling in the defaults they decide (a
// preset's window). It reports each field at fault through fail, as the
// config's own checks do. The root package's wiring is the one Checker,
// so that what validates is what runs; config stays plain data and
// imports no kind and no part.
type Checker interface {
	// Brokers names the broker kinds the build has; nil: none is read
	// (a check for what builds no consumer or publisher, as the
	// outbox's), and their blocks wait, unread, for a check that does.
	Brokers() []string
	// ConsumeSettings is a new, empty consume: block of broker, to read
	// a config's into; nil when the build has no such consumer.
	ConsumeSettings(broker string) ConsumeSettings
	// PublishSettings is a new, empty publish: block of broker; nil
	// when the build has no such publisher.
	PublishSettings(broker string) PublishSettings
	// CheckStore checks the store's URL (and what is in front of it,
	// redis:) with the store kind its scheme names.
	CheckStore(c *Config, fail FailFunc)
	// CheckParts checks what only the parts can say, last.
	CheckParts(c *Config, fail FailFunc)
}

// ValidateWith is Validate, with check (when set) on what the kinds and
// parts say.
func (c *Config) ValidateWith(check Checker) error {
	return errors.Join(c.validate(nil, check)...)
}

// failFunc is FailFunc, for config's own checks.
type failFunc = FailFunc

// validate is ValidateWith, each error also naming the line of its field
// (or of the nearest enclosing field written in the file) when lines is
// set. The checks run section by section, in the order of the errors they
// report, and the parts' check last.
func (c *Config) validate(lines fieldLines, check Checker) []error {
	var errs []error
	fail := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s%s", field, fmt.Sprintf(format, args...), lines.at(field)))
	}
	// A broker's block is read here, by its kind: what is wrong with its
	// fields comes with their own lines, as the config's other fields'.
	report := func(err error) { errs = append(errs, err) }
	c.checkServer(fail)
	if check != nil {
		check.CheckStore(c, fail)
	}
	c.checkTokens(fail)
	named := map[string]bool{}
	for i, t := range c.Tenants {
		checkName(fmt.Sprintf("tenants[%d].name", i), t.Name, named, fail)
		l := t.Limits
		if l.Timeout < 0 || l.Concurrency < 0 || l.Retry.MaxAttempts < 0 || l.Transform.Timeout < 0 || l.Transform.MaxMemory < 0 || l.Transform.MaxOutput < 0 {
			fail(fmt.Sprintf("tenants[%d].limits", i), "cannot be negative (unset: the defaults)")
		}
	}
	for i, a := range c.TenantEgress.Allow {
		if _, err := egress.ParseAllow(a); err != nil {
			fail(fmt.Sprintf("tenant_egress.allow[%d]", i), "%q: want an address or a CIDR prefix (10.0.5.0/24, fd00::/8, 10.0.5.7)", a)
		}
	}
	if c.Effects.MaxResult < 0 || c.Effects.MaxLease < 0 || c.Effects.Retention < 0 {
		fail("effects", "limits and retention cannot be negative")
	}
	c.checkUpstreams(fail)
	if c.Effects.MaxResult > 16<<20 {
		fail("effects.max_result", "at most 16MiB")
	}
	c.checkAlerts(fail)
	if p := c.Objects.Poll; p != 0 && time.Duration(p) < MinObjectsPoll {
		fail("objects.poll", "%s is under %s: every replica reads the store each poll; a change through the API reaches PostgreSQL's replicas at once by NOTIFY anyway", time.Duration(p), MinObjectsPoll)
	}
	dests := map[string]bool{}
	for i := range c.Destinations {
		c.checkDestination(i, dests, check, report, fail)
	}
	// Without sources, upstreams or a token of the API to create sources
	// with at runtime, the gateway would take nothing.
	if len(c.Sources) == 0 && len(c.Upstreams) == 0 && !c.API.createsSources() {
		fail("sources", "at least one source (or one of upstreams) is required, or an api.tokens token to create sources with through the API (POST /v1/sources)")
	}
	// Each destination's tenant, by name, read once: every route of every
	// source is checked against it (a search of the list each was 10,000
	// sources times 10,000 destinations, 330 ms a check).
	tenants := make(map[string]string, len(c.Destinations))
	for _, d := range c.Destinations {
		if _, ok := tenants[d.Name]; !ok {
			tenants[d.Name] = d.Tenant
		}
	}
	sources := map[string]bool{}
	for i := range c.Sources {
		c.checkSource(i, sources, dests, tenants, check, report, fail)
	}
	if check != nil {
		check.CheckParts(c, fail)
	}
	return errs
}

// MaxNameLen bounds a source's or destination's name: the operator's
// filters (events ls --source, ...) take at most as long a name, and one
// of 5,000 characters made a 5 KB intake URL and every listing as wide.
const MaxNameLen = 200

// checkName reports a record's name that is not a name, or that an
// earlier record of its kind took (seen); it adds the name to seen.
func checkName(field, name string, seen map[string]bool, fail failFunc) {
	switch {
	case !nameRE.MatchString(name):
		fail(field, "%q: want letters, digits, '.', '_' or '-'", name)
	case len(name) > MaxNameLen:
		fail(field, "%.40q...: %d characters, want at most %d", name, len(name), MaxNameLen)
	case seen[name]:
		fail(field, "%q is used twice", name)
	}
	seen[name] = true
}

// checkHTTPURL reports a field that is not an http:// or https:// URL.
func checkHTTPURL(field, raw string, fail failFunc) {
	if u, err := url.Parse(raw); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fail(field, "%q: want an http:// or https:// URL", Redact(raw))
	}
}

// checkServer checks what the listeners and the store are.
func (c *Config) checkServer(fail failFunc) {
	// The store's URL is its kind's to check (Checker.CheckStore).
	if c.MaxBodySize > MaxMaxBodySize {
		fail("max_body_size", "%d bytes: at most 256MiB", c.MaxBodySize)
	}
	if c.MaxBodySize < 0 || c.MaxInflightBytes < 0 {
		// How the two limits fit together is intake's to say (the parts'
		// check).
		fail("max_body_size", "sizes cannot be negative")
	}
	if c.Metrics.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Metrics.Listen); err != nil {
			fail("metrics.listen", "%q: want host:port, e.g. 127.0.0.1:9090", c.Metrics.Listen)
		}
	}
	if c.TLS.Enabled() {
		if c.TLS.CertFile == "" || c.TLS.KeyFile == "" {
			fail("tls", "set both cert_file and key_file")
		} else if _, err := c.TLS.Load(); err != nil {
			fail("tls", "%v", err)
		}
	}
	if _, err := c.TrustedProxyPrefixes(); err != nil {
		fail("trusted_proxies", "%v", err)
	}
	if c.Delivery.Concurrency < 0 {
		fail("delivery.concurrency", "must be at least 1 (unset: 64)")
	}
}

// checkTokens checks the API's tokens, and that a publisher's sources
// are outbox sources.
func (c *Config) checkTokens(fail failFunc) {
	names := map[string]bool{}
	for i, t := range c.API.Tokens {
		f := fmt.Sprintf("api.tokens[%d]", i)
		checkName(f+".name", t.Name, names, fail)
		switch {
		case t.Hash != "" && t.Token != "":
			fail(f+".token", "a token created through the API keeps only its hash, never its value")
		case t.Hash == "" && len(t.Token) < 16:
			fail(f+".token", "shorter than 16 characters: too easy to guess")
		}
		if t.ReadOnly && len(t.Publish) > 0 {
			fail(f+".publish", "a token either reads (read_only) or publishes (publish), not both")
		}
		if (t.ReadOnly || len(t.Publish) > 0) && len(t.Pull) > 0 {
			fail(f+".pull", "a token that pulls (pull) does only that: not read_only, no publish")
		}
		checkTenant(f+".tenant", t.Tenant, fail)
		for j, name := range t.Pull {
			at := fmt.Sprintf("%s.pull[%d]", f, j)
			i := slices.IndexFunc(c.Destinations, func(d Destination) bool { return d.Name == name })
			switch {
			case i < 0:
				fail(at, "no destination named %q", name)
			case c.Destinations[i].Pull == nil:
				fail(at, "destination %q is not a pull destination (pull: {}): only a pull destination's deliveries are taken", name)
			case t.Tenant != "" && c.Destinations[i].Tenant != t.Tenant:
				fail(at, "destination %q is not tenant %s's: a tenant's token pulls from its own destinations", name, t.Tenant)
			}
		}
		for j, name := range t.Publish {
			at := fmt.Sprintf("%s.publish[%d]", f, j)
			i := slices.IndexFunc(c.Sources, func(s Source) bool { return s.Name == name })
			switch {
			case i < 0:
				fail(at, "no source named %q", name)
			case !c.Sources[i].Outbox:
				fail(at, "source %q is not an outbox source (outbox: true): only an outbox's events may be published", name)
			case t.Tenant != "" && c.Sources[i].Tenant != t.Tenant:
				fail(at, "source %q is not tenant %s's: a tenant's token publishes to its own sources", name, t.Tenant)
			}
		}
	}
}

// checkUpstreams checks the user's APIs behind the idempotency proxy.
func (c *Config) checkUpstreams(fail failFunc) {
	names := map[string]bool{}
	for i, a := range c.Upstreams {
		f := fmt.Sprintf("upstreams[%d]", i)
		checkName(f+".name", a.Name, names, fail)
		if (a.Listen == "") == (a.Prefix == "") {
			fail(f, "give listen (its own address) or prefix (a path on the intake listener), one of them")
		}
		if a.Prefix != "" && (!strings.HasPrefix(a.Prefix, "/") || strings.HasPrefix(a.Prefix, "/in/") || a.Prefix == "/in" || strings.HasSuffix(a.Prefix, "/")) {
			fail(f+".prefix", "%q: want a path like /payments, outside /in/ and without a trailing slash", a.Prefix)
		}
		checkHTTPURL(f+".upstream", a.Upstream, fail)
		checkIdempotency(f+".idempotency", a.Idempotency, fail)
	}
}

// checkIdempotency checks an upstream API's Idempotency-Key policy; f is
// its path.
func checkIdempotency(f string, idem Idempotency, fail failFunc) {
	for i, m := range idem.Methods {
		at := fmt.Sprintf("%s.methods[%d]", f, i)
		switch {
		case !httpguts.ValidHeaderFieldName(m): // a method is a token, as a header's name is
			fail(at, "%q: not a method", m)
		case m != strings.ToUpper(m):
			// Matched as sent, and clients send POST: a lowercase method
			// matches no request, so the API would run without its keys.
			fail(at, "%q: methods are case-sensitive; did you mean %s?", m, strings.ToUpper(m))
		}
	}
	for _, st := range idem.NotStarted {
		if st < 400 || st > 599 {
			fail(f+".not_started", "%d: want a 4xx or 5xx status", st)
		}
	}
	for _, h := range idem.ClientHeaders {
		if !httpguts.ValidHeaderFieldName(h) {
			fail(f+".client_headers", "%q: not a header name", h)
		}
	}
	for _, c := range idem.ClientCookies {
		if !httpguts.ValidHeaderFieldName(c) {
			fail(f+".client_cookies", "%q: not a cookie name", c)
		}
	}
	if idem.SingleTenant && (len(idem.ClientHeaders) > 0 || len(idem.ClientCookies) > 0) {
		fail(f, "single_tenant shares one scope among all callers: it takes no client_headers or client_cookies")
	}
	if idem.Timeout < 0 || idem.Lease < 0 || idem.Wait < 0 {
		fail(f, "durations cannot be negative")
	}
	if idem.Lease > 0 && time.Duration(idem.Lease) < time.Second {
		// Renewed every third of itself: a lease of milliseconds writes to
		// the store hundreds of times a second per request, and one shorter
		// than the store's round trip runs out between renewals, for a
		// retry to run the upstream a second time.
		fail(f+".lease", "%s: want at least 1s (it is renewed every third of itself)", time.Duration(idem.Lease))
	}
}

// checkAlerts checks the alerts' thresholds and where they are sent.
func (c *Config) checkAlerts(fail failFunc) {
	if c.Alerts.URL != "" {
		checkHTTPURL("alerts.url", c.Alerts.URL, fail)
	}
	checkHeaders("alerts.headers", c.Alerts.Headers, fail)
	if c.Alerts.DuplicateFactor < 0 || (c.Alerts.DuplicateFactor > 0 && c.Alerts.DuplicateFactor <= 1) {
		fail("alerts.duplicate_factor", "want more than 1 (an alert above the baseline itself would fire every other hour)")
	}
	if c.Alerts.MinVolume < 0 || c.Alerts.DeadLetters < 0 {
		fail("alerts", "min_volume and dead_letters cannot be negative")
	}
	if c.Alerts.BaselineFloor < 0 || c.Alerts.BaselineFloor >= 1 {
		fail("alerts.baseline_floor", "want a rate from 0 to 1")
	}
	names := map[string]bool{}
	if c.Alerts.URL != "" {
		names["url"] = true // alerts.url is the json channel "url"
	}
	for i, ch := range c.Alerts.Channels {
		checkAlertChannel(fmt.Sprintf("alerts.channels[%d]", i), ch, names, fail)
	}
}

// checkAlertChannel checks the form of each field a channel sets; which
// fields its kind needs, and the kind itself, are the kind's to check
// (internal/alert/channel, through the parts' check).
func checkAlertChannel(f string, ch AlertChannel, names map[string]bool, fail failFunc) {
	checkName(f+".name", ch.Name, names, fail)
	checkTenant(f+".tenant", ch.Tenant, fail)
	if ch.Kind == "" {
		fail(f+".kind", "required: json, slack, teams, discord or email")
	}
	if u, err := url.Parse(ch.URL); ch.URL != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		// Not quoted: Slack's and Discord's secret is the URL's path.
		fail(f+".url", "want an http:// or https:// URL")
	}
	checkHeaders(f+".headers", ch.Headers, fail)
	s := ch.SMTP
	if s.Host != "" && strings.ContainsAny(s.Host, ":/ ") {
		fail(f+".smtp.host", "%q: want a host name or address alone (the port is smtp.port)", s.Host)
	}
	if s.Port < 0 || s.Port > 65535 {
		fail(f+".smtp.port", "%d: want 1 to 65535 (default 587)", s.Port)
	}
	if s.From != "" {
		if _, err := mail.ParseAddress(s.From); err != nil {
			fail(f+".smtp.from", "%q: not an address (%v)", s.From, err)
		}
	}
	for j, to := range s.To {
		if _, err := mail.ParseAddress(to); err != nil {
			fail(fmt.Sprintf("%s.smtp.to[%d]", f, j), "%q: not an address (%v)", to, err)
		}
	}
	if s.Password != "" && s.Username == "" {
		fail(f+".smtp.username", "required with a password")
	}
}

// checkDestination checks destinations[i], whose name goes into dests.
func (c *Config) checkDestination(i int, dests map[string]bool, kinds Checker, report func(error), fail failFunc) {
	d := c.Destinations[i]
	f := fmt.Sprintf("destinations[%d]", i)
	checkName(f+".name", d.Name, dests, fail)
	checkTenant(f+".tenant", d.Tenant, fail)
	switch {
	case d.Publish != nil && d.URL != "":
		fail(f+".url", "a destination either has a url or publishes to a queue (publish:), not both")
	case d.Pull != nil && (d.Publish != nil || d.URL != ""):
		fail(f+".pull", "a pull destination has no url and no publish: its consumers take its deliveries")
	case d.Pull != nil:
	case d.Publish != nil:
		readPublish(d.Publish, f, kinds, report, fail)
	default:
		checkHTTPURL(f+".url", d.URL, fail)
		if u, err := url.Parse(d.URL); d.Tenant != "" && err == nil {
			// A name is left to the dial, where the address it resolves
			// to is checked: nothing is resolved here.
			if err := egress.New(c.TenantEgress.Prefixes()).CheckHost(u.Hostname()); err != nil {
				fail(f+".url", "%v (tenant_egress.allow lets them reach others)", err)
			}
		}
	}
	checkHeaders(f+".headers", d.Headers, fail)
	if d.Concurrency < 0 {
		fail(f+".concurrency", "must be at least 1 (unset: no bound of its own)")
	}
	if d.Breaker.FailureRatio < 0 || d.Breaker.FailureRatio > 1 || d.Breaker.Failures < 0 || d.Breaker.MinAttempts < 0 {
		fail(f+".breaker", "failures and min_attempts cannot be negative; failure_ratio is from 0 to 1")
	}
	if d.Retry.MaxAttempts < 1 {
		fail(f+".retry.max_attempts", "must be at least 1")
	}
	// What each status means is deliver's to read (the parts' check);
	// here, where an answer has no status to read.
	if d.Publish != nil && (len(d.RetryOn) > 0 || len(d.FinalOn) > 0 || d.StandardWebhooksAbort) {
		fail(f+".retry_on", "a queue destination's publish has no HTTP status to classify (retry_on, final_on and standard_webhooks_abort are for url: and pull: destinations)")
	}
	if d.Pull != nil && d.StandardWebhooksAbort {
		fail(f+".standard_webhooks_abort", "a pull consumer's ack carries no answer headers: only a url: destination reads webhook-delivery")
	}
	if d.Retry.BaseDelay > d.Retry.MaxDelay {
		fail(f+".retry", "base_delay %s is above max_delay %s", time.Duration(d.Retry.BaseDelay), time.Duration(d.Retry.MaxDelay))
	}
	// A lease shorter than an attempt lets a second worker take the
	// delivery over while the first still waits on the destination:
	// the event is delivered twice, at once, again and again.
	// A pull destination's attempt is bounded by its own timeout, its
	// lease the consumer's once handed out (deliver.Destination.OwnLease).
	held := time.Duration(c.Delivery.Lease)
	if d.Pull == nil && held < time.Duration(d.Timeout)+lease.AttemptMargin(held) {
		fail("delivery.lease", "%s does not cover %s's timeout (%s) plus its margin (%s, or a fifth of a lease under %s): an attempt would outlive its lease and be made twice at once; use at least %s",
			held, f, time.Duration(d.Timeout), lease.Margin, 5*lease.Margin, lease.MinLease(time.Duration(d.Timeout)))
	}
}

// checkSource checks sources[i], whose name goes into sources; dests are
// the destinations' names, tenants their tenants.
func (c *Config) checkSource(i int, sources, dests map[string]bool, tenants map[string]string, kinds Checker, report func(error), fail failFunc) {
	s := c.Sources[i]
	f := fmt.Sprintf("sources[%d]", i)
	checkName(f+".name", s.Name, sources, fail)
	if s.Consume != nil {
		readConsume(s.Consume, f, kinds, report, fail)
		c.Sources[i].defaultRules()
		s = c.Sources[i]
	}
	if s.Outbox {
		checkOutbox(f, s, fail)
	}
	for j, sec := range s.Secrets {
		switch {
		case sec == "":
			fail(fmt.Sprintf("%s.secrets[%d]", f, j), "empty")
		case strings.IndexByte(sec, 0) >= 0:
			// No provider's secret holds one; it is a value cut or pasted
			// wrongly, and signing over it would refuse every webhook.
			fail(fmt.Sprintf("%s.secrets[%d]", f, j), "holds a NUL byte: paste the secret as the provider's dashboard shows it")
		}
	}
	if strings.IndexByte(s.VerifyToken, 0) >= 0 {
		fail(f+".verify_token", "holds a NUL byte: give the token as the provider's dashboard shows it")
	}
	if h := s.Signature.Header; h != "" && !httpguts.ValidHeaderFieldName(h) {
		// A name no request can carry (CR, LF, NUL, a space, a colon):
		// every webhook would be refused as unsigned.
		fail(f+".signature.header", "%q: not a header name (letters, digits and !#$%%&'*+-.^_`|~ only, no space, colon or control character)", h)
	}
	if s.PublicURL != "" {
		// Answered as the source's intake URL, and signed over (twilio).
		checkHTTPURL(f+".public_url", s.PublicURL, fail)
	}
	if s.OnMissingKey != "accept" && s.OnMissingKey != "reject" {
		fail(f+".on_missing_key", "%q: want accept or reject", s.OnMissingKey)
	}
	if s.OnBadSignature != "reject" && s.OnBadSignature != "discard" {
		fail(f+".on_bad_signature", "%q: want reject or discard", s.OnBadSignature)
	}
	if o := s.Order; o != nil {
		if o.Mode != "latest" && o.Mode != "fifo" {
			fail(f+".order.mode", "%q: want latest or fifo", o.Mode)
		}
		if o.OnStale != "hold" && o.OnStale != "deliver" {
			fail(f+".order.on_stale", "%q: want hold or deliver", o.OnStale)
		}
	}
	checkTenant(f+".tenant", s.Tenant, fail)
	named := map[string]bool{}
	for j, d := range s.Destinations {
		at := fmt.Sprintf("%s.destinations[%d]", f, j)
		switch {
		case !dests[d.Name]:
			fail(at, "no destination named %q", d.Name)
		case named[d.Name]:
			fail(at, "%q is listed twice (an event has one delivery per destination)", d.Name)
		default:
			checkRouteTenant(at, s, d.Name, tenants, fail)
		}
		named[d.Name] = true
	}
}

// checkTenant checks a tenant's name: a name, as a source's is (it is
// matched as given, and shown in the audit log).
func checkTenant(f, tenant string, fail failFunc) {
	if tenant != "" && (!IsName(tenant) || len(tenant) > MaxNameLen) {
		fail(f, "%q: want letters, digits, '.', '_' or '-', at most %d", tenant, MaxNameLen)
	}
}

// checkRouteTenant checks that source s (at f) may route to destination
// name: one of its own tenant, or one of no tenant (shared: the
// operator's). One tenant's events never reach another's destination,
// and a shared source's never reach a tenant's, whose token would
// then see events that are not its own. tenants are the destinations'
// tenants, by name.
func checkRouteTenant(f string, s Source, name string, tenants map[string]string, fail failFunc) {
	tenant := tenants[name]
	if tenant == "" || tenant == s.Tenant {
		return
	}
	if s.Tenant == "" {
		fail(f, "destination %q is tenant %s's: a source of no tenant routes to shared destinations only", name, tenant)
		return
	}
	fail(f, "destination %q is tenant %s's, not %s's: a tenant's source routes to its own destinations or to shared ones", name, tenant, s.Tenant)
}

// checkOutbox checks what an outbox source (at f) may not have: a queue,
// secrets, a provider's preset, events without a key.
func checkOutbox(f string, s Source, fail failFunc) {
	switch {
	case s.Consume != nil:
		fail(f+".outbox", "a source takes its events from a queue (consume:) or from the outbox, not both")
	case len(s.Secrets) > 0:
		fail(f+".secrets", "an outbox source takes no secrets: what is published to it is not signed (the caller's transaction, or its API token, says who may publish)")
	case s.Preset != "generic":
		fail(f+".preset", "%q: an outbox source's events are the caller's own, not a provider's: leave preset unset (generic)", s.Preset)
	case s.OnMissingKey != "reject":
		fail(f+".on_missing_key", "%q: an outbox source needs every publish's key (a publish without one could not be told from its retry): leave it unset (reject)", s.OnMissingKey)
	}
}

// Warnings are settings that are valid but weaken a promise or do nothing;
// serve and validate print them.
func (c *Config) Warnings() []string {
	var w []string
	if c.StoreScheme() == "sqlite" { // the sqlite: section's own settings
		switch strings.ToUpper(c.SQLite.Synchronous) {
		case "OFF":
			w = append(w, "sqlite.synchronous: OFF: a crash of the machine (not only of oncehook) can lose events already answered 200")
		case "NORMAL":
			w = append(w, "sqlite.synchronous: NORMAL: a power loss can lose the last events already answered 200")
		}
	}
	if len(c.API.Tokens) == 0 {
		w = append(w, "api.tokens is empty: the API listener (effects ledger, admin API, dashboard) is off")
	}
	for i, s := range c.Sources {
		if len(s.Destinations) == 0 {
			w = append(w, fmt.Sprintf("sources[%d] (%s) has no destinations: its events are stored and deduplicated, but delivered nowhere", i, s.Name))
		}
		// A batch is answered whole: one update without an id refuses the
		// messages beside it too, and the provider retries them all until
		// it gives up.
		if (s.Preset == "whatsapp" || s.Preset == "evolution") && s.OnMissingKey == "reject" {
			w = append(w, fmt.Sprintf("sources[%d].on_missing_key: reject: a %s batch with one update that has no id (a WhatsApp account_update, say) is refused whole, with the events beside it, every time the provider retries it", i, s.Preset))
		}
		// Meta registers a callback URL only once its GET handshake is
		// answered, which needs verify_token; any other preset ignores it.
		switch {
		case s.Preset == "whatsapp" && s.VerifyToken == "":
			w = append(w, fmt.Sprintf("sources[%d] (%s) has no verify_token: Meta's GET hub.challenge check, which registers the callback URL, is answered 401", i, s.Name))
		case s.Preset != "whatsapp" && s.VerifyToken != "":
			w = append(w, fmt.Sprintf("sources[%d].verify_token: only the whatsapp preset answers a hub.verify_token handshake; preset %s ignores it", i, s.Preset))
		}
		if s.BodyRetention > 0 && s.BodyRetention >= s.Window {
			w = append(w, fmt.Sprintf("sources[%d].body_retention (%s) is not shorter than its window (%s): bodies go with their keys anyway", i,
				time.Duration(s.BodyRetention), time.Duration(s.Window)))
		}
	}
	return append(w, c.renamed...)
}
