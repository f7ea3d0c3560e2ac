// Package doctor is the key doctor: it reads a source's recent events, and
// recent duplicates, and says when the key looks wrong.
package doctor

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/oncehook/oncehook/store"
)

// The key doctor. A wrong key feels like protection while it lets
// duplicates through (a key that holds a per-delivery value: every resend
// is "new") or drops real events (a key too coarse: WhatsApp's status id
// without the status, so "read" is taken for a resend of "delivered").
// Both show in the data:
//
//   - distinct keys whose bodies are identical, apart from fields that
//     change per delivery (times, attempt counters, delivery ids): the key
//     holds a per-delivery value (finding key_per_delivery). Two distinct
//     events differ in something else, their own id at least;
//   - duplicates whose bodies differ from the stored copy in business
//     fields (status, amount): the key is too coarse (finding
//     key_too_coarse). Duplicates are not stored, so a running gateway
//     keeps a sample of their bodies (Samples) for this check.

// Finding kinds.
const (
	FindingPerDelivery = "key_per_delivery"
	FindingTooCoarse   = "key_too_coarse"
)

// Finding is one thing the doctor flags.
type Finding struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
	// Fields are the body fields involved: those that differ.
	Fields []string `json:"fields"`
	// Events is how many sampled events show it, of Sampled; Keys, some of
	// their keys. (Message says it in English; the dashboard writes it in
	// the reader's language from these fields.)
	Events  int      `json:"events"`
	Sampled int      `json:"sampled"`
	Keys    []string `json:"keys"`
}

// SourceDiagnosis is the doctor's answer for one source.
type SourceDiagnosis struct {
	Source string `json:"source"`
	// SampledEvents is how many recent stored events were read;
	// SampledDuplicates, how many recent duplicates were compared with
	// their stored copy (none without a running gateway's sample).
	SampledEvents     int       `json:"sampled_events"`
	SampledDuplicates int       `json:"sampled_duplicates"`
	Findings          []Finding `json:"findings"`
	Note              string    `json:"note,omitempty"`
}

// Report is the doctor's answer.
type Report struct {
	Sources []SourceDiagnosis `json:"sources"`
	// Store holds what concerns every source at once: the store's writer
	// (a lock another connection holds).
	Store []Finding `json:"store"`
	// Note says what the report could not see.
	Note string `json:"note,omitempty"`
}

// Samples keeps the latest duplicates' bodies per source, bounded. It sits
// on intake's path, so in a storm of duplicates it copies at most
// sampleRate bodies a second per source (after a burst of sampleBurst):
// the doctor needs a sample, not every copy.
type Samples struct {
	mu      sync.Mutex
	per     int
	max     int
	sources map[string][]sample
	next    map[string]int
	budget  map[string]*tokens
}

const (
	sampleRate  = 20.0
	sampleBurst = 20.0
)

// tokens is a source's token bucket.
type tokens struct {
	n  float64
	at time.Time
}

type sample struct {
	key  string
	body []byte
}

// NewSamples keeps up to per duplicates per source, of bodies up to
// maxBody bytes.
func NewSamples(per, maxBody int) *Samples {
	return &Samples{per: per, max: maxBody, sources: map[string][]sample{}, next: map[string]int{}, budget: map[string]*tokens{}}
}

// Add records a duplicate (receive.Options.OnDuplicate).
func (s *Samples) Add(source, key string, body []byte) {
	if s == nil || len(body) > s.max {
		return
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.budget[source]
	if b == nil {
		b = &tokens{n: sampleBurst, at: now}
		s.budget[source] = b
	}
	b.n = min(sampleBurst, b.n+now.Sub(b.at).Seconds()*sampleRate)
	b.at = now
	if b.n < 1 {
		return
	}
	b.n--
	smp := sample{key: key, body: bytes.Clone(body)}
	list := s.sources[source]
	if len(list) < s.per {
		s.sources[source] = append(list, smp)
		return
	}
	i := s.next[source]
	list[i] = smp
	s.next[source] = (i + 1) % s.per
}

func (s *Samples) of(source string) []sample {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sample(nil), s.sources[source]...)
}

// Diagnose checks one source's keys: its recent stored events (read from
// a), and the duplicates samples kept (nil: none, and a note says the
// second check did not run).
func Diagnose(ctx context.Context, a store.Admin, samples *Samples, source string) (SourceDiagnosis, error) {
	d := SourceDiagnosis{Source: source, Findings: []Finding{}}
	bodies, err := recentBodies(ctx, a, source)
	if err != nil {
		return d, err
	}
	d.SampledEvents = len(bodies)
	// 1. Distinct keys, identical bodies.
	if f, ok := perDeliveryFinding(bodies); ok {
		d.Findings = append(d.Findings, f)
	}
	// 2. Duplicates whose bodies differ in business fields.
	if samples == nil {
		d.Note = "duplicates are sampled by a running gateway: ask it (--api) to also check for keys that are too coarse"
	}
	f, sampled, ok := tooCoarseFinding(ctx, a, source, samples.of(source))
	d.SampledDuplicates = sampled
	if ok {
		d.Findings = append(d.Findings, f)
	}
	return d, nil
}

// sampledBody is one recent event's key and its body's fields, flattened.
type sampledBody struct {
	key    string
	fields map[string]string
}

// recentBodies reads the source's latest events that have a key (up to
// doctorSample), skipping one swept meanwhile.
func recentBodies(ctx context.Context, a store.Admin, source string) ([]sampledBody, error) {
	list, err := a.ListEvents(ctx, store.EventQuery{Source: source, Limit: doctorSample})
	if err != nil {
		return nil, err
	}
	var bodies []sampledBody
	for _, e := range list {
		if e.Keyless || e.Size > maxSampledBody {
			continue
		}
		ev, err := a.Event(ctx, e.ID)
		if err != nil {
			continue // swept meanwhile
		}
		bodies = append(bodies, sampledBody{key: e.Key, fields: flatten(ev.Body, ev.ContentType)})
	}
	return bodies, nil
}

// perDeliveryFinding groups the bodies by what they say apart from
// per-delivery fields: events of distinct keys in one group mean the key
// holds a per-delivery value.
func perDeliveryFinding(bodies []sampledBody) (Finding, bool) {
	type group struct {
		keys   map[string]bool
		bodies []map[string]string
	}
	groups := map[[32]byte]*group{}
	var order [][32]byte
	for _, b := range bodies {
		h := sha256.New()
		for _, k := range slices.Sorted(maps.Keys(b.fields)) {
			v := b.fields[k]
			if perDelivery(k, v) {
				continue
			}
			fmt.Fprintf(h, "%s=%s\n", k, v)
		}
		var sum [32]byte
		h.Sum(sum[:0])
		g := groups[sum]
		if g == nil {
			g = &group{keys: map[string]bool{}}
			groups[sum] = g
			order = append(order, sum)
		}
		g.keys[b.key] = true
		g.bodies = append(g.bodies, b.fields)
	}
	var perDeliveryEvents int
	var keys []string
	fields := map[string]bool{}
	for _, sum := range order {
		g := groups[sum]
		if len(g.keys) < 2 {
			continue
		}
		perDeliveryEvents += len(g.bodies)
		for k := range g.keys {
			if len(keys) < 5 {
				keys = append(keys, k)
			}
		}
		for _, f := range differing(g.bodies) {
			fields[f] = true
		}
	}
	// Two events alike can be chance (two identical pings); three or more
	// are a pattern.
	if perDeliveryEvents < 3 {
		return Finding{}, false
	}
	sort.Strings(keys)
	fs := slices.Sorted(maps.Keys(fields))
	apart := "identical bodies (the key comes from outside the body, a header)"
	if len(fs) > 0 {
		apart = "the same body apart from " + strings.Join(fs, ", ")
	}
	return Finding{Kind: FindingPerDelivery, Fields: fs, Events: perDeliveryEvents, Sampled: len(bodies), Keys: keys,
		Message: fmt.Sprintf("%d of %d recent events share %s with an event of another key: the key seems to hold a per-delivery value, so every resend looks new and gets through",
			perDeliveryEvents, len(bodies), apart)}, true
}

// tooCoarseFinding compares each sampled duplicate with the event stored
// under its key: business fields that differ mean the key is too coarse.
// It answers how many duplicates it could compare.
func tooCoarseFinding(ctx context.Context, a store.Admin, source string, recent []sample) (Finding, int, bool) {
	var sampled, coarse int
	var coarseKeys []string
	coarseFields := map[string]bool{}
	stored := map[string]map[string]string{}
	for _, smp := range recent {
		orig, ok := stored[smp.key]
		if !ok {
			orig = storedBody(ctx, a, source, smp.key)
			stored[smp.key] = orig
		}
		if orig == nil {
			continue
		}
		sampled++
		dup := flatten(smp.body, "")
		var diff []string
		for _, f := range differing([]map[string]string{orig, dup}) {
			if !perDelivery(f, orig[f]) && !perDelivery(f, dup[f]) {
				diff = append(diff, f)
			}
		}
		if len(diff) == 0 {
			continue
		}
		coarse++
		if len(coarseKeys) < 5 && !slices.Contains(coarseKeys, smp.key) {
			coarseKeys = append(coarseKeys, smp.key)
		}
		for _, f := range diff {
			coarseFields[f] = true
		}
	}
	if coarse == 0 {
		return Finding{}, sampled, false
	}
	fs := slices.Sorted(maps.Keys(coarseFields))
	return Finding{Kind: FindingTooCoarse, Fields: fs, Events: coarse, Sampled: sampled, Keys: coarseKeys,
		Message: fmt.Sprintf("%d of %d recent duplicates differ from the stored event in %s: the key seems too coarse, so real changes are dropped as duplicates",
			coarse, sampled, strings.Join(fs, ", "))}, sampled, true
}

func storedBody(ctx context.Context, a store.Admin, source, key string) map[string]string {
	list, err := a.ListEvents(ctx, store.EventQuery{Source: source, KeyPrefix: key, Limit: 20})
	if err != nil {
		return nil
	}
	for _, e := range list {
		if e.Key != key {
			continue
		}
		ev, err := a.Event(ctx, e.ID)
		if err != nil {
			return nil
		}
		return flatten(ev.Body, ev.ContentType)
	}
	return nil
}

// flatten reads a body into field paths and their values: JSON objects
// and arrays (a.b[0].c), or a form. Anything else is one field, "(body)".
func flatten(body []byte, contentType string) map[string]string {
	out := map[string]string{}
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err == nil {
		walk("", v, out)
		return out
	}
	if vals, err := url.ParseQuery(string(body)); err == nil && (strings.Contains(contentType, "form") || strings.Contains(string(body), "=")) {
		for k, vs := range vals {
			out[k] = strings.Join(vs, ",")
		}
		return out
	}
	out["(body)"] = string(body)
	return out
}

func walk(path string, v any, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			p := k
			if path != "" {
				p = path + "." + k
			}
			walk(p, c, out)
		}
	case []any:
		for i, c := range x {
			walk(fmt.Sprintf("%s[%d]", path, i), c, out)
		}
	case string:
		out[path] = x
	case json.Number:
		out[path] = x.String()
	case nil:
		out[path] = "null"
	default:
		out[path] = fmt.Sprint(x)
	}
}

// differing returns the fields whose values are not the same in every one
// of bodies (or missing from some).
func differing(bodies []map[string]string) []string {
	seen := map[string]bool{}
	var out []string
	for _, b := range bodies {
		for f := range b {
			if seen[f] {
				continue
			}
			seen[f] = true
			v, ok := bodies[0][f]
			for _, o := range bodies {
				if w, has := o[f]; has != ok || w != v {
					out = append(out, f)
					break
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// perDeliveryWords are words of field names whose values change from one
// delivery of an event to the next: times, attempt counters, signatures.
var perDeliveryWords = map[string]bool{
	"time": true, "timestamp": true, "ts": true, "date": true, "at": true, "created": true, "updated": true, "sent": true,
	"attempt": true, "attempts": true, "retry": true, "retries": true, "delivery": true, "deliveries": true,
	"nonce": true, "signature": true, "hmac": true, "trace": true, "request": true, "expires": true,
}

var dateLike = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}`)

// words splits a field name at underscores, dashes and camelCase.
func words(name string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	for i, r := range name {
		switch {
		case r == '_' || r == '-' || r == ' ':
			flush()
		case unicode.IsUpper(r) && i > 0 && len(cur) > 0 && !unicode.IsUpper(cur[len(cur)-1]):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
	}
	flush()
	return out
}

// perDelivery says whether a field looks like it changes per delivery.
func perDelivery(path, value string) bool {
	name := path
	if i := strings.LastIndexAny(path, ".]"); i >= 0 && i+1 < len(path) {
		name = path[i+1:]
	}
	for _, w := range words(name) {
		if perDeliveryWords[w] {
			return true
		}
	}
	if dateLike.MatchString(value) {
		return true
	}
	if n, err := strconv.ParseInt(value, 10, 64); err == nil {
		// Unix time in seconds or milliseconds, around now.
		now := time.Now()
		for _, t := range []time.Time{time.Unix(n, 0), time.UnixMilli(n)} {
			if t.After(now.AddDate(-10, 0, 0)) && t.Before(now.AddDate(1, 0, 0)) {
				return true
			}
		}
	}
	return false
}

// doctorSample is how many recent events of a source the doctor reads.
const doctorSample = 300

// maxSampledBody bounds the bodies the doctor reads (the gateway's
// duplicate samples keep none larger either). It runs on each view of a
// source's page: 300 bodies of up to max_body_size each (5 MiB by default,
// 256 MiB at most), read and flattened whole, took seconds and gigabytes
// per view. What a key holds shows as well in the small events.
const maxSampledBody = 64 << 10
