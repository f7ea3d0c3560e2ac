package table

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/oncehook/oncehook/broker"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/deliver"
)

// Kind is an outbox table in the user's own database as a source kind:
// `consume: {table: {url: ..., table: outbox}}`. It only consumes: a
// destination cannot be a table (PublishSettings is nil).
func Kind() broker.Kind { return kind{} }

type kind struct{}

func (kind) Name() string                            { return "table" }
func (kind) ConsumeSettings() config.ConsumeSettings { return &ConsumeSettings{} }
func (kind) PublishSettings() config.PublishSettings { return nil }

func (kind) NewConsumer(src broker.Source, s config.ConsumeSettings) (broker.Consumer, error) {
	settings, err := broker.SettingsOf[*ConsumeSettings](s, "table")
	if err != nil {
		return nil, err
	}
	return NewConsumer(src, *settings)
}

func (kind) NewPublisher(broker.Destination, config.PublishSettings) (deliver.Sender, error) {
	return nil, fmt.Errorf("table: a table is only a source (consume:)")
}

// The headers a row's columns are handed to intake under, beside the ones
// its headers column names (these win): the source's key, type and order
// entity rules read them by default (DefaultRules).
const (
	HeaderID            = "Outbox-Id"
	HeaderType          = "Outbox-Type"
	HeaderAggregateType = "Outbox-Aggregate-Type"
	HeaderAggregateID   = "Outbox-Aggregate-Id"
	// HeaderReconcile, in a row's headers column ({"Oncehook-Reconcile":
	// "true"}), marks the row as a reconciliation pass's, as
	// POST /v1/publish?reconcile=true does (receive.Envelope.Reconcile): an
	// id already stored is counted as republished, not as a duplicate, and
	// never raises the duplicate-rate alert. It is read and removed before
	// the source's rules see the headers; a value neither true nor false
	// refuses the row (malformed), as the API refuses ?reconcile=maybe.
	HeaderReconcile = "Oncehook-Reconcile"
)

// Defaults of a table source's settings.
const (
	DefaultTable        = "outbox"
	DefaultPollInterval = time.Second
	DefaultBatch        = 100
	// NoColumn, as columns.headers, says the table has no headers column.
	NoColumn = "-"
)

// ConsumeSettings are a source's `consume: {table: {...}}`: the outbox
// table the user's code inserts into, in its own transactions.
type ConsumeSettings struct {
	// URL is the user's database: postgres:// (or postgresql://) or
	// mysql:// (MySQL 8, MariaDB 10.6 and later: both take SKIP LOCKED).
	URL string `yaml:"url"`
	// Table is the outbox table (default outbox), schema.table allowed.
	Table string `yaml:"table"`
	// Rejected is where a row intake refused is moved, with the reason
	// (default <table>_rejected; `oncehook outbox ddl` prints both).
	Rejected string `yaml:"rejected"`
	// Columns maps the Debezium outbox layout to the table's own names.
	Columns Columns `yaml:"columns"`
	// OrderBy is the column rows are taken in the order of (default the
	// id column): a sequence or a time, where ids are random (UUIDs) and
	// order per entity matters.
	OrderBy string `yaml:"order_by"`
	// Channel is the PostgreSQL channel whose NOTIFY wakes the consumer
	// (default oncehook_<table>, what the printed trigger sends on).
	Channel string `yaml:"channel"`
	// PollInterval is how often the table is read when nothing woke the
	// consumer (default 1s): the latency without the trigger.
	PollInterval config.Duration `yaml:"poll_interval"`
	// Batch bounds the rows taken in one transaction (default 100).
	Batch int `yaml:"batch"`
}

// Columns are the outbox table's column names, Debezium's by default.
type Columns struct {
	ID            string `yaml:"id"`            // the event's key unless the source's key rules say otherwise
	AggregateType string `yaml:"aggregatetype"` // handed over as Outbox-Aggregate-Type
	AggregateID   string `yaml:"aggregateid"`   // the order entity (order: {})
	Type          string `yaml:"type"`          // the event type
	Payload       string `yaml:"payload"`       // the body, byte for byte
	Headers       string `yaml:"headers"`       // a JSON object of headers; "-": none
}

// withDefaults is s with every unset field its default.
func (s ConsumeSettings) withDefaults() ConsumeSettings {
	if s.Table == "" {
		s.Table = DefaultTable
	}
	if s.Rejected == "" {
		s.Rejected = s.Table + "_rejected"
	}
	c := &s.Columns
	for _, f := range []struct {
		v   *string
		def string
	}{{&c.ID, "id"}, {&c.AggregateType, "aggregatetype"}, {&c.AggregateID, "aggregateid"},
		{&c.Type, "type"}, {&c.Payload, "payload"}, {&c.Headers, "headers"}} {
		if *f.v == "" {
			*f.v = f.def
		}
	}
	if s.OrderBy == "" {
		s.OrderBy = c.ID
	}
	if s.Channel == "" {
		s.Channel = DefaultChannel(s.Table)
	}
	if s.PollInterval == 0 {
		s.PollInterval = config.Duration(DefaultPollInterval)
	}
	if s.Batch == 0 {
		s.Batch = DefaultBatch
	}
	return s
}

// DefaultChannel is the NOTIFY channel of table's trigger: oncehook_<table>
// (a schema's dot made '_').
func DefaultChannel(table string) string {
	return "oncehook_" + strings.ReplaceAll(table, ".", "_")
}

// Where names the table, for people.
func (s *ConsumeSettings) Where() string { return "table " + s.withDefaults().Table }

// DefaultRules makes the settings a config.RuleDefaulter: the row's id is
// the key, its type column the type, its aggregateid the order entity,
// unless the source names its own.
func (s *ConsumeSettings) DefaultRules() config.Rules {
	return config.Rules{
		Key:    []string{"header:" + HeaderID},
		Type:   []string{"header:" + HeaderType},
		Entity: "header:" + HeaderAggregateID,
	}
}

// identifier is a name written into SQL (quoted there too): letters,
// digits and '_', as both databases take unquoted, up to PostgreSQL's 63.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

const wantTable = "want a table's name (letters, digits and '_', not starting with a digit; schema.table allowed)"

// tableName reports whether v is a table's name: an identifier, or two
// (schema.table).
func tableName(v string) bool {
	parts := strings.Split(v, ".")
	ok := len(parts) <= 2
	for _, p := range parts {
		ok = ok && identifier.MatchString(p)
	}
	return ok
}

// Check reports each field at fault, under f (sources[i].consume.table).
func (s *ConsumeSettings) Check(f string, fail config.FailFunc) {
	broker.CheckURL(s.URL, f+".url", []string{"postgres", "postgresql", "mysql"}, fail)
	if u, err := url.Parse(s.URL); err == nil && u.Scheme == "mysql" && strings.Trim(u.Path, "/") == "" {
		fail(f+".url", "name the database: mysql://user:password@host:3306/dbname")
	}
	d := s.withDefaults()
	if !tableName(d.Table) {
		fail(f+".table", "%q: %s", d.Table, wantTable)
		return // what is named after it would only echo this
	}
	if !tableName(d.Rejected) {
		fail(f+".rejected", "%q: %s", d.Rejected, wantTable)
	}
	if d.Rejected == d.Table {
		fail(f+".rejected", "%q: the table itself; rejected rows go to another table", d.Rejected)
	}
	if !identifier.MatchString(d.Channel) {
		fail(f+".channel", "%q: want a channel's name (letters, digits and '_', not starting with a digit)", d.Channel)
	}
	for _, c := range []struct{ field, v string }{
		{"columns.id", d.Columns.ID}, {"columns.aggregatetype", d.Columns.AggregateType},
		{"columns.aggregateid", d.Columns.AggregateID}, {"columns.type", d.Columns.Type},
		{"columns.payload", d.Columns.Payload}, {"order_by", s.OrderBy},
	} {
		if c.v != "" && !identifier.MatchString(c.v) { // "": the default (order_by's, columns.id)
			fail(f+"."+c.field, "%q: want a column's name (letters, digits and '_', not starting with a digit)", c.v)
		}
	}
	if h := d.Columns.Headers; h != NoColumn && !identifier.MatchString(h) {
		fail(f+".columns.headers", "%q: want a column's name, or %q for none", h, NoColumn)
	}
	if s.PollInterval < 0 || (s.PollInterval > 0 && time.Duration(s.PollInterval) < 10*time.Millisecond) {
		fail(f+".poll_interval", "%s: at least 10ms", time.Duration(s.PollInterval))
	}
	if s.Batch < 0 || s.Batch > 10000 {
		fail(f+".batch", "%d: from 1 to 10000", s.Batch)
	}
}
