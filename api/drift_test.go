package api_test

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/admin/admintest"
	"github.com/oncehook/oncehook/api"
	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/store"
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

// failing is an Operator whose Sources fails with err (the other methods
// are not called).
type failing struct {
	admin.Operator
	err error
}

func (f failing) Sources(context.Context) ([]admin.SourceView, error) { return nil, f.err }

// The named errors an Operator returns are the same named errors through
// the API's Client: errors.Is(err, admin.ErrConflict) after a 409, and
// store.ErrUnavailable after a 503, as on the Service itself (before, a
// 409 and a 503 came back as errors that were neither). Every exported
// Err of package admin is here: one added there fails this test until it
// is, and the API answers it.
func TestEveryNamedErrorOfAnOperatorSurvivesTheAPI(t *testing.T) {
	named := map[string]error{
		"admin.ErrNotFound": admin.ErrNotFound, "admin.ErrInvalid": admin.ErrInvalid,
		"admin.ErrConflict": admin.ErrConflict, "admin.ErrGone": admin.ErrGone, "admin.ErrForbidden": admin.ErrForbidden,
		"store.ErrUnavailable": store.ErrUnavailable,
		"effect.ErrNotFound":   effect.ErrNotFound, "effect.ErrConflict": effect.ErrConflict, "effect.ErrInvalid": effect.ErrInvalid,
	}
	files, err := filepath.Glob("../admin/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("admin's sources: %v", err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for name, obj := range file.Scope.Objects {
			if obj.Kind == ast.Var && strings.HasPrefix(name, "Err") && named["admin."+name] == nil {
				t.Errorf("admin.%s is not checked here: add it, and its answer to the API's table", name)
			}
		}
	}
	for name, want := range named {
		mux := http.NewServeMux()
		api.Register(mux, failing{err: fmt.Errorf("the service says: %w", want)}, nil)
		srv := httptest.NewServer(mux)
		_, err := api.NewClient(srv.URL, "t", nil).Sources(context.Background())
		srv.Close()
		var answer *api.Error
		if !errors.Is(err, want) || !errors.As(err, &answer) || answer.Status == http.StatusInternalServerError {
			t.Errorf("%s through the API: %v (%T); want an *api.Error that is %s", name, err, err, name)
		}
	}
}
