package transform

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestNothingARunLeavesReachesTheNext: invariant 21. A script that stores a counter anywhere it can reach
// without making it (a symbol-keyed global, a property of a built-in's method, of an intrinsic only syntax
// reaches, of its own top level or of the sandbox's functions), or makes the global object non-extensible,
// must see the same thing on every run of a reused runtime: the same event, the same bytes.
func TestNothingARunLeavesReachesTheNext(t *testing.T) {
	const src = `addHandler("transform", (request, context) => {
  const r = {};
  const bump = (name, o) => { try { o.__n = (o.__n || 0) + 1; } catch (e) {} r[name] = o.__n ?? 0; };
  const S = Symbol.for("n");
  globalThis[S] = (globalThis[S] || 0) + 1;
  r.symbol = globalThis[S];
  bump("JSON.parse", JSON.parse);
  bump("Array.prototype.map", Array.prototype.map);
  bump("console.log", console.log);
  bump("Math.random", Math.random);
  bump("Date.now", Date.now);
  bump("arrayIterator", Object.getPrototypeOf([].values()));
  bump("stringIterator", Object.getPrototypeOf(""[Symbol.iterator]()));
  bump("mapIterator", Object.getPrototypeOf(new Map().values()));
  bump("regExpStringIterator", Object.getPrototypeOf("a".matchAll(/a/g)));
  bump("TypedArray", Object.getPrototypeOf(Uint8Array));
  bump("TypedArray.prototype", Object.getPrototypeOf(Uint8Array.prototype));
  bump("GeneratorFunction", Object.getPrototypeOf(function* () {}).constructor);
  bump("Generator.prototype", Object.getPrototypeOf(function* () {}).prototype);
  bump("AsyncGeneratorFunction.prototype", Object.getPrototypeOf(async function* () {}));
  bump("AsyncFunction", Object.getPrototypeOf(async function () {}).constructor);
  bump("factory", __oncehook_factory);
  bump("run", __oncehook_run);
  bump("__proto__ setter", Object.getOwnPropertyDescriptor(Object.prototype, "__proto__").set);
  r.extensible = Object.isExtensible(globalThis);
  try { Object.preventExtensions(globalThis); } catch (e) {}
  request.body = r;
  return request;
});`
	s := mustCompile(t, "leftovers.js", src, Options{Concurrency: 1})
	var first string
	for i := 0; i < 3; i++ {
		out, err := s.Run(context.Background(), stripeRequest(`{"id":"evt_1"}`), event("evt_1"))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = string(out.Body)
			if strings.Contains(first, ":2") || !strings.Contains(first, `"extensible":true`) {
				t.Fatalf("first run: %s", first)
			}
			continue
		}
		if string(out.Body) != first {
			t.Fatalf("run %d saw what an earlier run left:\n got %s\nwant %s", i+1, out.Body, first)
		}
	}
}

// TestQueuedJobsDoNotPileUp: a run that leaves a promise's job queued (never run: transformations are
// synchronous) must not leave it, and what it holds, in the runtime the next event runs on. Each run here
// holds 1 MiB alone, well under its 16 MiB limit; kept, the seventh or so event failed out of memory.
func TestQueuedJobsDoNotPileUp(t *testing.T) {
	s := mustCompile(t, "jobs.js", `addHandler("transform", (request) => {
  const big = "x".repeat(1 << 20) + request.body.id;
  Promise.resolve().then(() => big.length);
  (async () => { await null; return big; })();
  return request;
});`, Options{Concurrency: 1, MaxMemory: 16 << 20})
	for i := 0; i < 16; i++ {
		if _, err := s.Run(context.Background(), stripeRequest(`{"id":"evt_1"}`), event("evt_1")); err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
	}
}

// TestAScriptCannotCloseItsWrapper: a script's top level is wrapped in a function that runs afresh for each
// event; a script with one `}` too many closed that function early and ran the code after it once per runtime,
// at the global level, where what it kept (a counter here) reached every later event the runtime ran: the same
// event then gave different bytes on each attempt. Such a script must be refused when it is compiled, as a
// syntax error, and a well-formed one whose strings and comments hold braces must still compile.
func TestAScriptCannotCloseItsWrapper(t *testing.T) {
	escapes := map[string]string{
		"counter.js": `addHandler("transform", (r) => { counter.n++; r.body = {n: counter.n}; return r; });
}
var counter = {n: 0};
function again() {`,
		"lexical.js": `addHandler("transform", (r) => { seen.push(1); r.body = {n: seen.length}; return r; });
}
const seen = [];
function __oncehook_factory(addHandler) {
  addHandler("transform", (r) => { seen.push(1); r.body = {n: seen.length}; return r; });`,
	}
	for name, src := range escapes {
		s, err := Compile(name, src, Options{Concurrency: 1})
		if err == nil {
			var bodies []string
			for i := 0; i < 3; i++ {
				out, err := s.Run(context.Background(), stripeRequest(`{"id":"evt_1"}`), event("evt_1"))
				if err != nil {
					t.Fatalf("%s: run: %v", name, err)
				}
				bodies = append(bodies, string(out.Body))
			}
			s.Close()
			t.Errorf("%s compiled, and the same event gave %q", name, bodies)
			continue
		}
		var se *Error
		if !errors.As(err, &se) || se.Kind != KindSyntax || !strings.HasPrefix(err.Error(), name+":") ||
			!strings.Contains(err.Error(), "}") {
			t.Errorf("%s: want a syntax error that names the file and the brace, got %v", name, err)
		}
	}
	fine := "// a } in a comment, /* and } here */\naddHandler(\"transform\", (r) => { r.body = {s: \"}\", t: `}${1}`, re: /}/.source}; return r; });\n"
	s := mustCompile(t, "fine.js", fine, Options{Concurrency: 1})
	out, err := s.Run(context.Background(), stripeRequest(`{}`), event("k"))
	if err != nil || string(out.Body) != `{"s":"}","t":"}1","re":"}"}` {
		t.Fatalf("fine.js: %s, %v", out.Body, err)
	}
}
