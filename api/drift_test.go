package api_test

import (
	"context"
	"net/http"
	"reflect"
	"testing"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/admin/admintest"
	"github.com/oncehook/oncehook/api"
)

// The table of actions (admin.Actions) is the API: each action is served
// at its route, its role agrees with its method (apiauth and the dashboard
// let a read-only token do a GET only), and the Client's method for it
// calls that route. A new action that misses one of these fails here.
func TestEveryActionHasARouteAndAClientMethod(t *testing.T) {
	fake := admintest.NewAPI(t)
	client := reflect.ValueOf(api.NewClient(fake.URL, "token", nil))

	served := map[string]bool{}
	for _, r := range api.Routes() {
		served[r] = true
	}
	seen := map[string]bool{}
	for _, a := range admin.Actions() {
		if seen[a.Name] {
			t.Errorf("two actions are named %s", a.Name)
		}
		seen[a.Name] = true
		if !served[a.Route.Method+" "+a.Route.Path] {
			t.Errorf("action %s: the API does not serve %s", a.Name, a.Route.Pattern())
		}
		if read := a.Route.Method == http.MethodGet; read != (a.Role == admin.RoleRead) {
			t.Errorf("action %s: role %s on a %s (a read is a GET, and only a read)", a.Name, a.Role, a.Route.Method)
		}
		if (a.Role == admin.RoleOperate) != (a.Audit != "") {
			t.Errorf("action %s: role %s with audit word %q (every change is audited, no read is)", a.Name, a.Role, a.Audit)
		}
		m := client.MethodByName(a.Method)
		if !m.IsValid() {
			t.Errorf("action %s: the Client has no method %s", a.Name, a.Method)
			continue
		}
		// Call it with zero arguments but for names (a route's wildcard
		// is never empty), and a flag both ways (SetPaused's pause and
		// resume): one of the calls must reach a's route.
		reached := false
		for _, flag := range []bool{false, true} {
			args := []reflect.Value{reflect.ValueOf(context.Background())}
			for i := 1; i < m.Type().NumIn(); i++ {
				v := reflect.New(m.Type().In(i)).Elem()
				switch v.Kind() {
				case reflect.Bool:
					v.SetBool(flag)
				case reflect.String:
					v.SetString("x")
				}
				args = append(args, v)
			}
			fake.Take()
			m.Call(args)
			hit := fake.Take()
			reached = reached || (len(hit) == 1 && hit[0] == a.Name)
		}
		if !reached {
			t.Errorf("action %s: Client.%s does not call %s", a.Name, a.Method, a.Route.Pattern())
		}
	}
}
