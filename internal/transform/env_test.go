package transform

import (
	"context"
	"errors"
	"strings"
	"testing"
)

const apiKey = "sk_live_4f9a7c2e81"

// TestAScriptReadsItsEnv: Hookdeck's scripts read their secrets as process.env.NAME; Svix's shape reads
// them the same way. A name the config sets is read in either, as a string, however it is written.
func TestAScriptReadsItsEnv(t *testing.T) {
	env := map[string]string{"API_KEY": apiKey, "TENANT": "acme-co"}
	hookdeck := mustCompile(t, "hookdeck.js", `addHandler("transform", (request) => {
  const { TENANT } = process.env;
  request.headers["x-api-key"] = process.env.API_KEY;
  request.headers["x-tenant"] = process.env["TENANT"] + "/" + TENANT;
  request.body = { names: Object.keys(process.env).sort(), has: "API_KEY" in process.env, not: "NOPE" in process.env };
  return request;
});`, Options{Env: env})
	out, err := hookdeck.Run(context.Background(), stripeRequest(`{"id":"evt_1"}`), event("evt_1"))
	if err != nil {
		t.Fatal(err)
	}
	if out.Header.Get("X-Api-Key") != apiKey || out.Header.Get("X-Tenant") != "acme-co/acme-co" ||
		string(out.Body) != `{"names":["API_KEY","TENANT"],"has":true,"not":false}` {
		t.Fatalf("hookdeck: %v %s", out.Header, out.Body)
	}
	svix := mustCompile(t, "svix.js", `function handler(webhook) {
  webhook.headers = { authorization: "Bearer " + process.env.API_KEY };
  return webhook;
}`, Options{Env: env})
	out, err = svix.Run(context.Background(), stripeRequest(`{"id":"evt_1"}`), event("evt_1"))
	if err != nil || out.Header.Get("Authorization") != "Bearer "+apiKey {
		t.Fatalf("svix: %v %v", out.Header, err)
	}
}

// TestAScriptReadingAnUnsetNameDoesNotCompile: a script that reads a name its destination's env does not
// set (the Hookdeck script moved here without its env) would dead-letter every delivery: it does not
// compile, so validate, transform test and a reload say so, naming every such name and the first one's line.
// A name in a comment is not a read; a script with no env reading none compiles as before.
func TestAScriptReadingAnUnsetNameDoesNotCompile(t *testing.T) {
	for name, c := range map[string]struct {
		src, want string
		line      int
	}{
		"dot":         {"addHandler(\"transform\", (r) => {\n  r.headers.a = process.env.API_TOKEN;\n  return r;\n});", "process.env.API_TOKEN is read but not set", 2},
		"bracket":     {"addHandler(\"transform\", (r) => {\n\n  r.headers.a = process.env['SECRET'] + process.env[\"OTHER\"];\n  return r;\n});", "process.env.SECRET, process.env.OTHER are read but not set", 3},
		"optional":    {"addHandler(\"transform\", (r) => { r.headers.a = process?.env?.TOKEN; return r; });", "process.env.TOKEN is read", 1},
		"destructure": {"const { API_KEY, REGION: region = \"us\" } = process.env;\naddHandler(\"transform\", (r) => r);", "process.env.REGION is read", 1},
		"split":       {"addHandler(\"transform\", (r) => {\n  r.headers.a = process\n    .env\n    .LATE;\n  return r;\n});", "process.env.LATE is read", 2},
	} {
		_, err := Compile(name+".js", c.src, Options{Env: map[string]string{"API_KEY": apiKey}})
		var se *Error
		if !errors.As(err, &se) || se.Kind != KindEnv || se.Line != c.line || !strings.Contains(err.Error(), c.want) ||
			!strings.Contains(err.Error(), "transform.env sets only API_KEY") {
			t.Errorf("%s: want %q at line %d, got %v", name, c.want, c.line, err)
			continue
		}
		if strings.Contains(err.Error(), apiKey) {
			t.Errorf("%s: the error shows a value: %v", name, err)
		}
	}
	_, err := Compile("none.js", `addHandler("transform", (r) => { r.headers.a = process.env.API_KEY; return r; });`, Options{})
	if err == nil || !strings.Contains(err.Error(), "none.js:1:") || !strings.Contains(err.Error(), "transform.env sets none") {
		t.Errorf("no env: %v", err)
	}
	mustCompile(t, "comments.js", "// process.env.OLD_KEY was the v1 key\n/* process.env[\"GONE\"] */\naddHandler(\"transform\", (r) => { r.headers.s = \"// not a comment\"; r.headers.a = process.env.API_KEY; return r; });",
		Options{Env: map[string]string{"API_KEY": apiKey}})
	mustCompile(t, "plain.js", `addHandler("transform", (r) => r);`, Options{})
	if _, err := Compile("bad.js", `addHandler("transform", (r) => r);`, Options{Env: map[string]string{"API-KEY": "x"}}); err == nil ||
		!strings.Contains(err.Error(), `"API-KEY" is not a variable's name`) {
		t.Errorf("a name that is not a variable's: %v", err)
	}
}

// TestAComputedReadOfAnUnsetNameNamesIt: a name the text does not show (computed at run time) cannot be
// refused when the script compiles; reading it fails the run with an error naming the variable and the
// script's line, not a TypeError about undefined further on or a ReferenceError about process.
func TestAComputedReadOfAnUnsetNameNamesIt(t *testing.T) {
	s := mustCompile(t, "computed.js", "addHandler(\"transform\", (r) => {\n  const name = \"API_\" + r.body.which;\n  r.headers.a = process.env[name].trim();\n  return r;\n});",
		Options{Env: map[string]string{"API_KEY": apiKey}})
	if _, err := s.Run(context.Background(), stripeRequest(`{"which":"KEY"}`), event("k")); err != nil {
		t.Fatalf("a name that is set: %v", err)
	}
	_, err := s.Run(context.Background(), stripeRequest(`{"which":"TOKEN"}`), event("k"))
	var se *Error
	if !errors.As(err, &se) || se.Kind != KindRuntime || se.Line != 3 ||
		!strings.Contains(err.Error(), "ReferenceError: process.env.API_TOKEN is not set: the destination's transform.env sets only API_KEY") {
		t.Fatalf("want the run's error naming process.env.API_TOKEN at line 3, got %v", err)
	}
}

// TestTheEnvIsFrozenAndNeverShown: invariant 21 and the env's secrecy. A run cannot change what the next
// reads (an assignment, a delete, a new name, or setting the env anew through the sandbox), and what a run
// shows (its thrown error, its logs, Hide over what it sent) never has a value in it.
func TestTheEnvIsFrozenAndNeverShown(t *testing.T) {
	s := mustCompile(t, "frozen.js", `addHandler("transform", (r) => {
  // A script is sloppy unless it says "use strict": there, a write to a frozen object is ignored.
  const tried = [];
  const attempt = (name, f) => { try { f(); } catch (e) { tried.push(name + ":" + e.name); } };
  attempt("assign", () => { "use strict"; process.env.API_KEY = "mine"; });
  attempt("add", () => { "use strict"; process.env["EX" + "TRA"] = "x"; });
  attempt("delete", () => { "use strict"; delete process.env.API_KEY; });
  attempt("replace", () => { "use strict"; process.env = {}; });
  attempt("reset", () => { __oncehook_env('{"values":{"API_KEY":"mine"},"has":""}'); });
  process.env.API_KEY = "sloppy";
  process.env["EX" + "TRA"] = "sloppy";
  if (!("EXTRA" in process.env)) tried.push("no EXTRA");
  console.log("the key is", process.env.API_KEY, process.env);
  r.body = { key: process.env.API_KEY, tried };
  if (r.body.throw) throw new Error("refused with " + process.env.API_KEY);
  return r;
});`, Options{Env: map[string]string{"API_KEY": apiKey}, Concurrency: 1})
	for i := 0; i < 3; i++ {
		out, err := s.Run(context.Background(), stripeRequest(`{"id":"evt_1"}`), event("evt_1"))
		if err != nil {
			t.Fatal(err)
		}
		want := `{"key":"` + apiKey + `","tried":["assign:TypeError","add:TypeError","delete:TypeError","replace:TypeError","reset:TypeError","no EXTRA"]}`
		if string(out.Body) != want {
			t.Fatalf("run %d:\n got %s\nwant %s", i+1, out.Body, want)
		}
		if strings.Join(out.Logs, "\n") != `the key is xxxxx {"API_KEY":"xxxxx"}` {
			t.Fatalf("run %d logged %q", i+1, out.Logs)
		}
		if got := s.Hide(string(out.Body)); strings.Contains(got, apiKey) {
			t.Fatalf("Hide left the value: %s", got)
		}
	}
	thrower := mustCompile(t, "thrower.js", `addHandler("transform", (r) => { throw new Error("refused with " + process.env.API_KEY); });`,
		Options{Env: map[string]string{"API_KEY": apiKey}})
	_, err := thrower.Run(context.Background(), stripeRequest(`{}`), event("k"))
	if err == nil || strings.Contains(err.Error(), apiKey) || !strings.Contains(err.Error(), "Error: refused with xxxxx") {
		t.Fatalf("a thrown value: %v", err)
	}
}
