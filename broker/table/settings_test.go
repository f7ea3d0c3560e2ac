package table

import (
	"fmt"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/config"
)

// A table source's settings are checked where the config is read, each
// error naming its field: a URL of another scheme (its password never
// shown), a table or column that is not an identifier.
func TestSettingsNameTheFieldAtFault(t *testing.T) {
	for _, c := range []struct {
		s    ConsumeSettings
		want string
	}{
		{ConsumeSettings{URL: "http://u:secret@h/db"}, `c.url: "http://u:xxxxx@h/db": want a postgres:// or postgresql:// or mysql:// URL`},
		{ConsumeSettings{URL: "mysql://root@h:3306"}, "c.url: name the database"},
		{ConsumeSettings{URL: "postgres://h/db", Table: "out box"}, `c.table: "out box": want a table's name`},
		{ConsumeSettings{URL: "postgres://h/db", Table: "a.b.c"}, `c.table: "a.b.c": want a table's name`},
		{ConsumeSettings{URL: "postgres://h/db", Table: "x; DROP TABLE y"}, `c.table: "x; DROP TABLE y"`},
		{ConsumeSettings{URL: "postgres://h/db", Rejected: "outbox"}, `c.rejected: "outbox": the table itself`},
		{ConsumeSettings{URL: "postgres://h/db", Columns: Columns{Payload: "body\""}}, `c.columns.payload: "body\""`},
		{ConsumeSettings{URL: "postgres://h/db", Columns: Columns{Headers: "h-1"}}, `c.columns.headers: "h-1": want a column's name, or "-" for none`},
		{ConsumeSettings{URL: "postgres://h/db", PollInterval: config.Duration(1)}, "c.poll_interval: 1ns: at least 10ms"},
		{ConsumeSettings{URL: "postgres://h/db", Batch: -1}, "c.batch: -1: from 1 to 10000"},
	} {
		var got []string
		c.s.Check("c", func(field, format string, args ...any) {
			got = append(got, field+": "+fmtS(format, args...))
		})
		if len(got) == 0 || !strings.Contains(strings.Join(got, "\n"), c.want) {
			t.Errorf("%+v: got %q, want %q", c.s, got, c.want)
		}
	}
	ok := ConsumeSettings{URL: "mysql://root@127.0.0.1:3306/test", Table: "shop.outbox", Columns: Columns{Headers: NoColumn}}
	ok.Check("c", func(field, format string, args ...any) { t.Errorf("%s: %s", field, fmtS(format, args...)) })
}

// The DDL names the table and its rejected table, quoted, and refuses a
// name that is not one rather than print SQL that injects.
func TestDDLForEachDatabase(t *testing.T) {
	pg, err := DDL("postgres", "shop.outbox", true)
	if err != nil || !strings.Contains(pg, `CREATE TABLE IF NOT EXISTS "shop"."outbox_rejected"`) || !strings.Contains(pg, "pg_notify('oncehook_shop_outbox'") {
		t.Errorf("postgres: %v\n%s", err, pg)
	}
	my, err := DDL("mysql", "", false)
	if err != nil || !strings.Contains(my, "CREATE TABLE IF NOT EXISTS `outbox`") || !strings.Contains(my, "LONGBLOB") {
		t.Errorf("mysql: %v\n%s", err, my)
	}
	if _, err := DDL("mysql", "", true); err == nil {
		t.Error("mysql --trigger: want an error (no NOTIFY)")
	}
	if _, err := DDL("postgres", "x'; DROP TABLE y; --", false); err == nil {
		t.Error("a table name that is no identifier: want an error")
	}
	if _, err := DDL("oracle", "", false); err == nil {
		t.Error("oracle: want an error")
	}
}

func fmtS(format string, args ...any) string { return fmt.Sprintf(format, args...) }
