package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Consume makes a source a queue's consumer: its events are the messages
// of one broker's stream, queue or topic, claimed as intake claims a
// request's and acknowledged to the broker only once the claim has
// committed (invariant 19). Exactly one broker is named, by its block
// (`consume: {nats: {url: ..., stream: ...}}`): config knows no broker,
// and the broker's kind reads and checks what its block says (see
// Checker), so a new broker is its own package and one registration line.
type Consume struct {
	// Broker is the kind the block names: nats, amqp, kafka, table.
	Broker string
	// Settings is the broker's block, read and checked by its kind: nil
	// until the config is checked with a build's kinds (ParseWith,
	// ValidateWith), or set by a caller that builds a config in code.
	Settings ConsumeSettings
	// Verify checks each message's signature with the source's preset, as
	// intake checks a request's (a queue that carries a provider's signed
	// events). Off by default: the broker's own credentials authenticate
	// who may publish.
	Verify bool

	block
}

// Publish makes a destination a queue: each delivery is a publish,
// acknowledged by the broker, with <source>:<key> as its message id, an
// attempt like a POST (retries, dead letters, holds). Exactly one broker
// is named, by its block, as Consume's is.
type Publish struct {
	// Broker is the kind the block names: nats, amqp, kafka.
	Broker string
	// Settings is the broker's block, read and checked by its kind (see
	// Consume.Settings).
	Settings PublishSettings

	block
}

// ConsumeSettings is one broker's consume: block, read by its kind: what
// it needs to consume (a URL, a stream, a queue, a topic) and its bounds.
type ConsumeSettings interface {
	// Check reports every field at fault through fail, each under f (the
	// block's path: sources[0].consume.nats).
	Check(f string, fail FailFunc)
	// Where names what is consumed, for people, without credentials:
	// "stream ORDERS", "queue payments", "topic clicks".
	Where() string
}

// RuleDefaulter is a consume block whose messages carry their key, type
// and order entity where its kind knows (a table's id, type and
// aggregateid columns, handed over as headers): the rules a source that
// names none of its own, and no preset, reads them by. A source's own
// key:, type: or order.entity always wins.
type RuleDefaulter interface {
	DefaultRules() Rules
}

// Rules are a RuleDefaulter's defaults: key and type rules as a source's
// key: and type: say them, and the rule order.entity takes when order:
// names none.
type Rules struct {
	Key    []string
	Type   []string
	Entity string
}

// defaultRules gives s the rules its consume block names where s names
// none of its own. A source with a provider's preset (a table of Stripe
// events, verify: true) keeps the preset's: its key is the provider's.
func (s *Source) defaultRules() {
	d, ok := s.Consume.Settings.(RuleDefaulter)
	if !ok || s.Preset != "generic" {
		return
	}
	r := d.DefaultRules()
	if len(s.Key) == 0 {
		s.Key = r.Key
	}
	if len(s.Type) == 0 {
		s.Type = r.Type
	}
	if s.Order != nil && s.Order.Entity == "" {
		s.Order.Entity = r.Entity
	}
}

// PublishSettings is one broker's publish: block, read by its kind.
type PublishSettings interface {
	// Check reports every field at fault through fail, each under f (the
	// block's path: destinations[0].publish.nats).
	Check(f string, fail FailFunc)
	// Target names what is published to, for people, without
	// credentials: "subject events.{source}.{type}".
	Target() string
}

// block is a queue block as written: the broker's settings until its kind
// reads them, and any other broker named beside it (an error).
type block struct {
	node   *yaml.Node
	others []string
}

// Kind names the broker ("" for none).
func (c *Consume) Kind() string {
	if c == nil {
		return ""
	}
	return c.Broker
}

// Where names what the source consumes, for people ("stream ORDERS");
// "" when it consumes nothing or its settings are not read yet.
func (c *Consume) Where() string {
	if c == nil || c.Settings == nil {
		return ""
	}
	return c.Settings.Where()
}

// Kind names the broker ("" for none).
func (p *Publish) Kind() string {
	if p == nil {
		return ""
	}
	return p.Broker
}

// Target names what the destination publishes to, for people, without
// credentials ("subject events.{source}.{type}"); "" for none.
func (p *Publish) Target() string {
	if p == nil || p.Settings == nil {
		return ""
	}
	return p.Settings.Target()
}

// UnmarshalYAML reads `{<broker>: {...}, verify: bool}`; the broker's
// block waits for its kind (readConsume).
func (c *Consume) UnmarshalYAML(n *yaml.Node) error {
	var err error
	c.Broker, c.block, err = readBlock(n, func(key string, v *yaml.Node) (bool, error) {
		if key != "verify" {
			return false, nil
		}
		return true, v.Decode(&c.Verify)
	})
	return err
}

// UnmarshalYAML reads `{<broker>: {...}}`; the broker's block waits for
// its kind (readPublish).
func (p *Publish) UnmarshalYAML(n *yaml.Node) error {
	var err error
	p.Broker, p.block, err = readBlock(n, func(string, *yaml.Node) (bool, error) { return false, nil })
	return err
}

// readBlock reads a queue block's mapping: own takes the keys that are
// not a broker's; the first other key names the broker.
func readBlock(n *yaml.Node, own func(key string, v *yaml.Node) (bool, error)) (string, block, error) {
	var b block
	broker := ""
	if n.Kind != yaml.MappingNode {
		return "", b, fmt.Errorf("line %d: want a mapping of fields", n.Line)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, v := n.Content[i].Value, n.Content[i+1]
		if ok, err := own(key, v); ok || err != nil {
			if err != nil {
				return "", b, err
			}
			continue
		}
		if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			continue // an empty block names no broker
		}
		if broker == "" {
			broker, b.node = key, v
		} else {
			b.others = append(b.others, key)
		}
	}
	return broker, b, nil
}

// checkQueueNode checks a consume: or publish: block's shape where the
// fields are checked (checkNode): a broker's block is a mapping, read by
// its kind later (readSettings); verify (consume's own) is a bool; any
// other key is a misspelling, named with the closest known one.
func checkQueueNode(n *yaml.Node, consume bool, path string, faulty *pathSet, kinds Checker) []error {
	if n.Kind != yaml.MappingNode {
		err := fmt.Errorf("%s: want a mapping of fields (line %d)", path, n.Line)
		*faulty = append(*faulty, path)
		*n = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: n.Line, Column: n.Column}
		return []error{err}
	}
	known := []string{}
	if kinds != nil {
		known = append(known, kinds.Brokers()...)
	}
	if consume {
		known = append(known, "verify")
	}
	var errs []error
	seen := map[string]bool{}
	kept := n.Content[:0:0]
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i].Value, n.Content[i+1]
		switch {
		case seen[key]:
			errs = append(errs, fmt.Errorf("%s: given twice (line %d)", join(path, key), n.Content[i].Line))
			*faulty = append(*faulty, join(path, key))
			continue
		case consume && key == "verify":
			errs = append(errs, checkNode(val, reflect.TypeFor[bool](), join(path, key), faulty, kinds)...)
		case val.Kind == yaml.MappingNode && (kinds == nil || slices.Contains(kinds.Brokers(), key)):
			// A broker's block: its kind checks its fields (readSettings).
		case val.Kind == yaml.ScalarNode && val.Tag == "!!null" && kinds != nil && slices.Contains(kinds.Brokers(), key):
			// An empty block names no broker: validate says so.
		default:
			errs = append(errs, fmt.Errorf("%s: unknown field (line %d)%s", join(path, key), n.Content[i].Line, Suggest(key, known)))
			*faulty = append(*faulty, path)
		}
		seen[key] = true
		kept = append(kept, n.Content[i], val)
	}
	n.Content = kept
	return errs
}

// readConsume reads a source's consume block with its broker's kind and
// has the kind check it; f is the source's path. Errors in the block's
// fields (a misspelled one, a value of the wrong type) are reported as
// the config's own are, with their lines, and what the kind's check would
// say of the same fields is left out as their echo.
func readConsume(c *Consume, f string, kinds Checker, report func(error), fail FailFunc) {
	f += ".consume"
	if !oneBroker(c.Broker, c.others, f, kinds, fail) {
		return
	}
	if c.Settings == nil {
		if kinds == nil || kinds.Brokers() == nil {
			return // read with no brokers (Parse): the block waits for them
		}
		s := kinds.ConsumeSettings(c.Broker)
		if s == nil {
			fail(f+"."+c.Broker, "this build has no %s consumer (it has %s)%s", c.Broker, strings.Join(kinds.Brokers(), ", "), Suggest(c.Broker, kinds.Brokers()))
			return
		}
		faulty, ok := readSettings(c.node, s, f+"."+c.Broker, kinds, report)
		if !ok {
			return
		}
		c.Settings, c.node = s, nil
		fail = faulty.filter(fail)
	}
	c.Settings.Check(f+"."+c.Broker, fail)
}

// readPublish is readConsume for a destination's publish block; f is the
// destination's path.
func readPublish(p *Publish, f string, kinds Checker, report func(error), fail FailFunc) {
	f += ".publish"
	if !oneBroker(p.Broker, p.others, f, kinds, fail) {
		return
	}
	if p.Settings == nil {
		if kinds == nil || kinds.Brokers() == nil {
			return
		}
		s := kinds.PublishSettings(p.Broker)
		if s == nil {
			fail(f+"."+p.Broker, "this build has no %s publisher (it has %s)%s", p.Broker, strings.Join(kinds.Brokers(), ", "), Suggest(p.Broker, kinds.Brokers()))
			return
		}
		faulty, ok := readSettings(p.node, s, f+"."+p.Broker, kinds, report)
		if !ok {
			return
		}
		p.Settings, p.node = s, nil
		fail = faulty.filter(fail)
	}
	p.Settings.Check(f+"."+p.Broker, fail)
}

// oneBroker reports a block that names no broker, or more than one.
func oneBroker(broker string, others []string, f string, kinds Checker, fail FailFunc) bool {
	if broker != "" && len(others) == 0 {
		return true
	}
	names := "a broker"
	if kinds != nil && kinds.Brokers() != nil {
		names = orList(kinds.Brokers())
	}
	fail(f, "name exactly one broker: %s", names)
	return false
}

// orList is "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// readSettings checks a broker's block against its kind's settings type
// (checkNode: unknown fields, values of the wrong type) and decodes it
// into s. It reports the block's errors through report and returns the
// fields at fault; ok is false when the block cannot be read at all.
func readSettings(n *yaml.Node, s any, path string, kinds Checker, report func(error)) (faulty pathSet, ok bool) {
	if n == nil {
		return nil, true // an empty block: its kind says what is required
	}
	for _, err := range checkNode(n, reflect.TypeOf(s), path, &faulty, kinds) {
		report(err)
	}
	if err := n.Decode(s); err != nil {
		report(fmt.Errorf("%s: %v", path, err))
		return faulty, false
	}
	return faulty, true
}

// filter is fail without what it would say of a field already reported.
func (s pathSet) filter(fail FailFunc) FailFunc {
	if len(s) == 0 {
		return fail
	}
	return func(field, format string, args ...any) {
		if !s.covers(field + ": ") {
			fail(field, format, args...)
		}
	}
}

// sameBlock reports whether two queue blocks say the same: a reload
// compares them (a consumer is bound at start), and a publisher whose
// block did not change keeps its connection.
func sameBlock(a, b *block, as, bs any) bool {
	if as != nil || bs != nil {
		return reflect.DeepEqual(as, bs)
	}
	var x, y any
	if a.node != nil {
		_ = a.node.Decode(&x)
	}
	if b.node != nil {
		_ = b.node.Decode(&y)
	}
	return reflect.DeepEqual(x, y) && slices.Equal(a.others, b.others)
}

// Same reports whether c and o consume the same (nil for none).
func (c *Consume) Same(o *Consume) bool {
	if c == nil || o == nil {
		return c == o
	}
	return c.Broker == o.Broker && c.Verify == o.Verify && sameBlock(&c.block, &o.block, any(c.Settings), any(o.Settings))
}

// Same reports whether p and o publish the same (nil for none).
func (p *Publish) Same(o *Publish) bool {
	if p == nil || o == nil {
		return p == o
	}
	return p.Broker == o.Broker && sameBlock(&p.block, &o.block, any(p.Settings), any(o.Settings))
}
