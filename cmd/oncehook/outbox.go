package main

import (
	"flag"
	"fmt"
	"io"

	outboxtable "github.com/oncehook/oncehook/broker/table"
)

// outboxCmd is `oncehook outbox ddl`: the SQL of an outbox table in the
// user's own database (a table source), for the user to run there.
func outboxCmd(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "ddl" {
		fmt.Fprintln(stderr, "usage: oncehook outbox ddl --db postgres|mysql [--table outbox] [--trigger]")
		return errUsage
	}
	fs := flag.NewFlagSet("outbox ddl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	db := fs.String("db", "", "the database: postgres, or mysql (MySQL 8, MariaDB 10.6 and later)")
	name := fs.String("table", outboxtable.DefaultTable, "the outbox table (schema.table allowed); rejected rows go to <table>_rejected")
	trigger := fs.Bool("trigger", false, "PostgreSQL: also the trigger whose NOTIFY wakes oncehook at each commit (else it polls)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *db == "" {
		return fmt.Errorf("--db: required: postgres or mysql")
	}
	ddl, err := outboxtable.DDL(*db, *name, *trigger)
	if err != nil {
		return err
	}
	_, err = io.WriteString(stdout, ddl)
	return err
}
