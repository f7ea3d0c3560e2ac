package main_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/admin/admintest"
)

// Every action of the table (admin.Actions) is a CLI command, or says why
// it is not: each command, run against an API that answers every route,
// calls its own action's route. A new action without its command, or a
// command that calls another route, fails here.
func TestEveryActionHasACLICommand(t *testing.T) {
	fake := admintest.NewAPI(t)
	dir := t.TempDir()
	for _, a := range admin.Actions() {
		if a.CLI == "" {
			if a.NoCLI == "" {
				t.Errorf("action %s has no CLI command, and does not say why (NoCLI)", a.Name)
			}
			continue
		}
		// The placeholders: ID a number, any other word in capitals a name.
		args := strings.Fields(a.CLI)
		for i, w := range args {
			switch {
			case w == "ID":
				args[i] = "7"
			case w == strings.ToUpper(w) && strings.Trim(w, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == "":
				args[i] = "x"
			}
		}
		fake.Take()
		out, _ := oncehook(t, dir, nil, append(args, "--api", fake.URL, "--token", "t")...)
		if hit := fake.Take(); !slices.Contains(hit, a.Name) {
			t.Errorf("action %s: `oncehook %s` does not call %s (it called %v):\n%s", a.Name, a.CLI, a.Route.Pattern(), hit, out)
		}
	}
}
