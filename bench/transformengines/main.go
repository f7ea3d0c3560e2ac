// Command transformengines measures the two pure-Go JavaScript engines oncehook could run transformations on,
// goja and modernc.org/quickjs, on what decides the choice (issue 29): microseconds per run of a typical script,
// the cost of a new runtime against a reused one, whether a memory limit stops a script that allocates without
// end, and which ES2020 forms users paste run at all. It lives in a module of its own (like sdktest/) so that
// the engine oncehook does not choose never becomes a dependency of the main module.
//
//	cd bench/transformengines && go run .
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/dop251/goja"
	"modernc.org/quickjs"
)

// stripeEvent is a ~2 KiB Stripe checkout event, the size of a typical provider event.
const stripeEvent = `{"id":"evt_1QbXyZ2eZvKYlo2C0pQq8R3s","object":"event","api_version":"2024-06-20","created":1733100000,
"data":{"object":{"id":"cs_test_a1B2c3D4e5F6g7H8i9J0","object":"checkout.session","after_expiration":null,
"allow_promotion_codes":false,"amount_subtotal":4990,"amount_total":4990,"automatic_tax":{"enabled":false,"liability":null,"status":null},
"billing_address_collection":"auto","cancel_url":"https://example.com/cancel","client_reference_id":"order_8812",
"consent":null,"created":1733099990,"currency":"brl","customer":"cus_R4nD0mCu5t0m3r","customer_creation":"always",
"customer_details":{"address":{"city":"Sao Paulo","country":"BR","line1":"Rua Augusta 1500","line2":"apto 42",
"postal_code":"01304-001","state":"SP"},"email":"maria@example.com","name":"Maria Souza","phone":"+5511999990000",
"tax_exempt":"none","tax_ids":[]},"customer_email":null,"expires_at":1733186390,"invoice":null,"livemode":false,
"locale":"pt-BR","metadata":{"campaign":"black-friday","utm_source":"instagram","utm_medium":"social"},
"mode":"payment","payment_intent":"pi_3QbXyZ2eZvKYlo2C1AbCdEf","payment_link":null,"payment_method_types":["card","boleto","pix"],
"payment_status":"paid","phone_number_collection":{"enabled":true},"recovered_from":null,"shipping_address_collection":null,
"shipping_cost":null,"shipping_details":null,"status":"complete","submit_type":"pay","subscription":null,
"success_url":"https://example.com/success?session_id={CHECKOUT_SESSION_ID}","total_details":{"amount_discount":0,
"amount_shipping":0,"amount_tax":0},"ui_mode":"hosted","url":null,"line_items":[{"id":"li_1","description":"Curso Online",
"quantity":1,"amount_total":4990,"price":{"id":"price_1","unit_amount":4990,"currency":"brl","product":"prod_1"}}]}},
"livemode":false,"pending_webhooks":2,"request":{"id":null,"idempotency_key":"a7f1c2d3-0b9e-4c55-8f0e-2d7c1b6a9e44"},
"type":"checkout.session.completed"}`

// renameScript is the typical transformation: pick and rename fields into the shape a destination's API wants.
const renameScript = `
function transform(request, context) {
  const s = request.body.data.object;
  const d = s.customer_details ?? {};
  request.body = {
    event_name: "Purchase",
    event_id: s.client_reference_id ?? request.body.id,
    event_time: request.body.created,
    user_data: { em: d.email?.toLowerCase(), ph: d.phone, ct: d.address?.city, country: d.address?.country },
    custom_data: { currency: s.currency.toUpperCase(), value: s.amount_total / 100,
      contents: s.line_items.map(({ price, quantity }) => ({ id: price.product, quantity })) },
    tags: { ...s.metadata, source: context.source },
  };
  request.headers["x-event-type"] = ` + "`${context.type}`" + `;
  return request;
}
function run(input) {
  const request = { headers: {}, body: JSON.parse(input), query: {}, path: "/" };
  return JSON.stringify(transform(request, { source: "stripe", type: "checkout.session.completed" }));
}
`

// engine is what each engine must offer for the measurement.
type engine interface {
	name() string
	// setup makes a runtime with the script evaluated (its functions defined).
	setup(script string) (runtimeHandle, error)
}

type runtimeHandle interface {
	run(input string) (string, error)
	// runWith runs src with the given bounds; the error says why it stopped.
	runWith(src string, timeout time.Duration, memLimit uint64) error
	close()
}

// goja

type gojaEngine struct{}

func (gojaEngine) name() string { return "goja" }

type gojaRT struct {
	rt *goja.Runtime
	fn goja.Callable
}

func (gojaEngine) setup(script string) (runtimeHandle, error) {
	rt := goja.New()
	rt.SetMaxCallStackSize(1000)
	if _, err := rt.RunString(script); err != nil {
		return nil, err
	}
	r := &gojaRT{rt: rt}
	if f, ok := goja.AssertFunction(rt.Get("run")); ok {
		r.fn = f
	}
	return r, nil
}

func (g *gojaRT) run(input string) (string, error) {
	v, err := g.fn(goja.Undefined(), g.rt.ToValue(input))
	if err != nil {
		return "", err
	}
	return v.String(), nil
}

func (g *gojaRT) runWith(src string, timeout time.Duration, _ uint64) error {
	t := time.AfterFunc(timeout, func() { g.rt.Interrupt("time limit") })
	defer t.Stop()
	defer g.rt.ClearInterrupt()
	_, err := g.rt.RunString(src)
	return err
}

func (g *gojaRT) close() {}

// quickjs

type quickjsEngine struct{}

func (quickjsEngine) name() string { return "modernc.org/quickjs" }

type quickjsRT struct{ vm *quickjs.VM }

func (quickjsEngine) setup(script string) (runtimeHandle, error) {
	vm, err := quickjs.NewVM()
	if err != nil {
		return nil, err
	}
	if _, err := vm.Eval(script, quickjs.EvalGlobal); err != nil {
		vm.Close()
		return nil, err
	}
	return &quickjsRT{vm: vm}, nil
}

func (q *quickjsRT) run(input string) (string, error) {
	v, err := q.vm.Call("run", input)
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("run returned %T", v)
	}
	return s, nil
}

func (q *quickjsRT) runWith(src string, timeout time.Duration, memLimit uint64) error {
	q.vm.SetEvalTimeout(timeout)
	if memLimit > 0 {
		q.vm.SetMemoryLimit(uintptr(memLimit))
	}
	_, err := q.vm.Eval(src, quickjs.EvalGlobal)
	return err
}

func (q *quickjsRT) close() { q.vm.Close() }

// es2020 are the forms users paste from Hookdeck's and Svix's docs and from modern JavaScript habits.
var es2020 = []struct{ name, src string }{
	{"optional chaining", `({a:{b:1}}).a?.b === 1 && ({}).x?.y === undefined`},
	{"nullish coalescing", `(null ?? 5) === 5 && (0 ?? 5) === 0`},
	{"object spread", `(({...{a:1}, b:2}).a === 1)`},
	{"array spread", `[...[1,2], 3].length === 3`},
	{"arrow functions", `((x) => x * 2)(2) === 4`},
	{"template literals", "`a${1+1}b` === 'a2b'"},
	{"destructuring", `(() => { const {a, b: [c]} = {a:1, b:[2]}; return a + c === 3 })()`},
	{"default params", `((a, b = 2) => a + b)(1) === 3`},
	{"rest params", `((...xs) => xs.length)(1,2,3) === 3`},
	{"classes", `(() => { class A { #p = 1; get p() { return this.#p } }; return new A().p === 1 })()`},
	{"Object.entries/fromEntries", `Object.fromEntries(Object.entries({a:1}).map(([k,v]) => [k.toUpperCase(), v])).A === 1`},
	{"Array.prototype.flat/flatMap", `[[1],[2]].flat().length === 2 && [1].flatMap(x => [x,x]).length === 2`},
	{"String.prototype.matchAll", `[..."a1b2".matchAll(/\d/g)].length === 2`},
	{"BigInt", `(2n ** 64n).toString() === "18446744073709551616"`},
	{"globalThis", `typeof globalThis === "object"`},
	{"Promise.allSettled", `typeof Promise.allSettled === "function"`},
	{"async/await syntax", `(async () => 1) instanceof Function`},
	{"regexp named groups", `/(?<y>\d{4})/.exec("2024").groups.y === "2024"`},
	{"regexp lookbehind", `/(?<=\$)\d+/.exec("$42")[0] === "42"`},
	{"exponent operator", `2 ** 10 === 1024`},
	{"String padStart/trimEnd", `"1".padStart(3, "0") === "001" && " a ".trimEnd() === " a"`},
	{"labelled for-of over Map", `(() => { let n = 0; for (const [k, v] of new Map([[1, 2]])) n += k + v; return n === 3 })()`},
	{"logical assignment (ES2021)", `(() => { let a = null; a ??= 1; return a === 1 })()`},
	{"String.replaceAll (ES2021)", `"a.b.c".replaceAll(".", "-") === "a-b-c"`},
	{"Array.at (ES2022)", `[1,2,3].at(-1) === 3`},
	{"structuredClone (host API)", `typeof structuredClone === "function"`},
}

func main() {
	engines := []engine{gojaEngine{}, quickjsEngine{}}
	fmt.Printf("Go %s, %s/%s, GOMAXPROCS=%d\n\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0))
	fmt.Printf("input: a %d-byte Stripe checkout.session.completed event; script: rename fields, return it\n\n", len(stripeEvent))

	fmt.Println("| engine | run, reused runtime | new runtime + compile + run | new runtime alone | allocs/run (reused) |")
	fmt.Println("|---|---|---|---|---|")
	for _, e := range engines {
		h, err := e.setup(renameScript)
		if err != nil {
			fail("%s: setup: %v", e.name(), err)
		}
		out, err := h.run(stripeEvent)
		if err != nil {
			fail("%s: run: %v", e.name(), err)
		}
		var check map[string]any
		if err := json.Unmarshal([]byte(out), &check); err != nil {
			fail("%s: output is not JSON: %v", e.name(), err)
		}
		reused := testing.Benchmark(func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := h.run(stripeEvent); err != nil {
					b.Fatal(err)
				}
			}
		})
		h.close()
		fresh := testing.Benchmark(func(b *testing.B) {
			for b.Loop() {
				h, err := e.setup(renameScript)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := h.run(stripeEvent); err != nil {
					b.Fatal(err)
				}
				h.close()
			}
		})
		bare := testing.Benchmark(func(b *testing.B) {
			for b.Loop() {
				h, err := e.setup("")
				if err != nil {
					b.Fatal(err)
				}
				h.close()
			}
		})
		fmt.Printf("| %s | %s | %s | %s | %d |\n", e.name(), us(reused), us(fresh), us(bare), reused.AllocsPerOp())
	}

	fmt.Println("\nbounds (each on its own fresh runtime; 64 MiB memory limit where the engine has one, 2 s time limit):")
	fmt.Println("\n| engine | script | stopped by | after | resident memory grew by |")
	fmt.Println("|---|---|---|---|---|")
	hostile := []struct{ name, src string }{
		{"allocate without end", `const a = []; for (;;) a.push("x".repeat(1024) + a.length);`},
		{"string doubling to 1 GiB", `let s = "x"; for (let i = 0; i < 30; i++) s = s + s; s.length`},
		{"infinite loop", `for (;;) {}`},
		{"deep recursion", `function f(n) { return f(n + 1) + 1 } f(0)`},
	}
	for _, e := range engines {
		for _, hs := range hostile {
			h, err := e.setup("")
			if err != nil {
				fail("%s: %v", e.name(), err)
			}
			before := heap()
			peak := before
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				t := time.NewTicker(2 * time.Millisecond)
				defer t.Stop()
				for {
					select {
					case <-stop:
						return
					case <-t.C:
						if h := heap(); h > peak {
							peak = h
						}
					}
				}
			}()
			start := time.Now()
			err = h.runWith(hs.src, 2*time.Second, 64<<20)
			took := time.Since(start)
			close(stop)
			<-done
			why := "nothing: finished"
			if err != nil {
				why = firstLine(err.Error())
			}
			fmt.Printf("| %s | %s | %s | %s | %d MiB |\n", e.name(), hs.name, why, took.Round(time.Millisecond), (peak-before)>>20)
			h.close()
			runtime.GC()
			debug.FreeOSMemory()
		}
	}

	fmt.Println("\nES2020 and what users paste (✓ runs and is true):")
	fmt.Printf("\n| form | %s | %s |\n|---|---|---|\n", engines[0].name(), engines[1].name())
	counts := make([]int, len(engines))
	for _, f := range es2020 {
		row := "| " + f.name + " |"
		for i, e := range engines {
			h, err := e.setup("var ok = (" + f.src + ");")
			mark := "✓"
			if err != nil {
				mark = "✗ " + strings.ReplaceAll(firstLine(err.Error()), "|", "/")
			} else {
				if !truthy(h) {
					mark = "✗ false"
				} else {
					counts[i]++
				}
				h.close()
			}
			row += " " + mark + " |"
		}
		fmt.Println(row)
	}
	fmt.Printf("| total | %d/%d | %d/%d |\n", counts[0], len(es2020), counts[1], len(es2020))
}

// truthy reads the global ok that the ES2020 probe set.
func truthy(h runtimeHandle) bool {
	switch r := h.(type) {
	case *gojaRT:
		return r.rt.Get("ok").ToBoolean()
	case *quickjsRT:
		v, err := r.vm.Eval("ok === true", quickjs.EvalGlobal)
		return err == nil && v == true
	}
	return false
}

// heap is the process's resident memory: quickjs allocates outside Go's heap (modernc.org/libc's allocator),
// so the Go heap alone would not see its growth.
func heap() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	var size, rss uint64
	fmt.Sscan(string(b), &size, &rss)
	return rss * uint64(os.Getpagesize())
}

func us(r testing.BenchmarkResult) string {
	return fmt.Sprintf("%.1f µs", float64(r.NsPerOp())/1000)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 70 {
		s = s[:70] + "…"
	}
	return s
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
	os.Exit(1)
}
