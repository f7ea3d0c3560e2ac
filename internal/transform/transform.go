// Package transform runs a destination's transformation: a user's JavaScript that reshapes what the
// destination receives (body, headers, path, query), or skips it, once per delivery attempt.
//
// A script is a pure function of the event (invariant 21). The same event and script give the same bytes on
// every attempt and every replica: the clock inside is the event's received time, Math.random is seeded from
// its key, there is no I/O, and a run sees nothing a previous run left (see sandbox.js). It is bounded: a
// time limit per run, a memory limit per runtime (QuickJS counts every allocation and throws past it, so a
// script that allocates without end is stopped, not the process), a call-depth limit and an output size
// limit; past any of them the run fails with an *Error that names the script's file and line, and only that
// run fails (invariant 13).
//
// Scripts are written as users already write them elsewhere: Hookdeck's
// addHandler("transform", (request, context) => request) and Svix's function handler(webhook).
//
// The engine is modernc.org/quickjs (pure Go, no cgo), chosen by measurement against goja: see BENCHMARKS.md.
// A script is compiled once to bytecode; runtimes are pooled and each is used by one goroutine at a time. A
// runtime is made at the script's first run, not when it is compiled, and closed once it has waited unused
// for Options.IdleRelease: a compiled script that does not run holds its bytecode, not a runtime.
package transform

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
	"modernc.org/quickjs"

	"github.com/oncehook/oncehook/internal/redact"
)

//go:embed sandbox.js
var sandboxJS string

// Defaults for Options left zero.
const (
	DefaultTimeout   = 50 * time.Millisecond
	DefaultMaxMemory = 64 << 20
	DefaultMaxOutput = 4 << 20
	// DefaultIdleRelease is how long an unused runtime is kept: a destination that sends steadily keeps
	// its runtimes warm (a new one costs milliseconds), one that stopped sending gives them back.
	DefaultIdleRelease = time.Minute
)

// Options bound a script's runs.
type Options struct {
	// Timeout bounds one run (default 50 ms).
	Timeout time.Duration
	// MaxMemory bounds what one runtime may allocate, the sandbox and the script's own data included
	// (default 64 MiB). A runtime runs one event at a time, and a run starts with none of the previous one's
	// data, so it is in effect a bound per run.
	MaxMemory int64
	// MaxOutput bounds what a run may ask to send: the body and the headers (default 4 MiB).
	MaxOutput int64
	// Concurrency is how many runs of the script may be under way at once (default 2 × GOMAXPROCS), and
	// so how many runtimes it keeps: a run beyond it waits for one to end. A run is CPU work, so more at
	// once would not end sooner; and it bounds what the script can hold in memory at once to Concurrency
	// × MaxMemory, however many deliveries are in flight.
	Concurrency int
	// Transport says why a header is the destination's transport's own (JetStream's Nats-* controls),
	// "" when it is not: with Protected's, the headers a script's value for is not sent (see Reserved).
	// Nil: the transport reserves none (HTTP's are Protected's).
	Transport func(canonical string) string
	// Env is what the script reads as process.env (the destination's transform.env): names to values,
	// secrets as a rule. A script that literally reads a name it does not set does not compile (see env.go).
	Env map[string]string
	// IdleRelease is how long a runtime may wait unused in the script's pool before it is closed (default
	// DefaultIdleRelease). A runtime holds about 400 KiB outside Go's heap: a gateway with a thousand
	// destinations that transform holds runtimes for the ones sending now, not for every one.
	IdleRelease time.Duration
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxMemory <= 0 {
		o.MaxMemory = DefaultMaxMemory
	}
	if o.MaxOutput <= 0 {
		o.MaxOutput = DefaultMaxOutput
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 2 * runtime.GOMAXPROCS(0)
	}
	if o.IdleRelease <= 0 {
		o.IdleRelease = DefaultIdleRelease
	}
	return o
}

// Script is one compiled transformation. It is safe for concurrent use: each run takes a runtime of its own.
type Script struct {
	name     string
	digest   string
	opts     Options
	bytecode []byte
	// prefixCols is how many columns the wrapper adds to the script's first line; lines is the script's
	// line count (the wrapper's tail is on the lines after it).
	prefixCols int
	lines      int
	// env is Options.Env as the sandbox's __oncehook_env takes it; secrets, its values, which what the
	// script's runs show (errors, logs) hides.
	env     string
	secrets *redact.Secrets

	// slots admits Concurrency runs at once.
	slots chan struct{}
	mu    sync.Mutex
	// idle are the runtimes no run holds, the one used last at the end. None is made before the first
	// run (Compile keeps only the bytecode), and one unused for IdleRelease is closed (release), so a
	// script that is not running costs its source and bytecode, not a runtime.
	idle    []idleVM
	release *time.Timer // armed while idle holds a runtime
	closed  bool
}

// idleVM is a pooled runtime and when its last run ended.
type idleVM struct {
	vm    *quickjs.VM
	since time.Time
}

// wrapperHead and wrapperTail make the script's top level a function, run afresh for every event: state a
// script keeps in a top-level variable never carries from one event to the next. The head is on the script's
// first line, so the script's lines keep their numbers.
const (
	wrapperHead = "function __oncehook_factory(addHandler) {"
	wrapperTail = "\n;return typeof handler === \"function\" ? handler : undefined;\n}"
)

// Compile compiles a script once; name is what errors call it (the file, or the destination's inline
// script). A syntax error is an *Error with its line and column.
func Compile(name, source string, opts Options) (*Script, error) {
	opts = opts.withDefaults()
	sum := sha256.Sum256([]byte(source))
	s := &Script{
		name:       name,
		digest:     "sha256:" + hex.EncodeToString(sum[:]),
		opts:       opts,
		prefixCols: len(wrapperHead),
		lines:      strings.Count(source, "\n") + 1,
		slots:      make(chan struct{}, opts.Concurrency),
	}
	env, err := envJSON(opts.Env)
	if err != nil {
		return nil, fmt.Errorf("transform %s: %w", name, err)
	}
	s.env = env
	s.secrets = redact.Values(slices.Collect(maps.Values(opts.Env)))
	// Compiling needs a runtime, not the sandbox: the bytecode is the same, and the sandbox's setup is
	// most of a runtime's cost.
	vm, err := quickjs.NewVM()
	if err != nil {
		return nil, fmt.Errorf("transform %s: new runtime: %w", name, err)
	}
	defer vm.Close()
	bc, err := vm.Compile(wrapperHead+source+wrapperTail, quickjs.EvalGlobal)
	if err != nil {
		return nil, s.scriptError(KindSyntax, err, 0)
	}
	if err := s.checkEnv(source, opts.Env); err != nil {
		return nil, err
	}
	s.bytecode = bc
	// Load it once, as every runtime will, so that an error in loading shows now and not at the first event.
	vm2, err := s.newRuntime()
	if err != nil {
		return nil, err
	}
	// The wrapper's function must be the whole program: a script that closes it early (one } too many)
	// runs what follows at the global level, once per runtime, and what that keeps reaches every later event.
	wrapped := wrapperHead + source + wrapperTail
	got, err := vm2.Call("__oncehook_source")
	// Not pooled: a destination that never sends never holds a runtime (the first run makes one).
	vm2.Close()
	if err != nil || got != wrapped {
		text, _ := got.(string)
		return nil, s.unwrapped(source, text)
	}
	return s, nil
}

// unwrapped is the syntax error of a script that closed the function its top level is wrapped in. When the
// wrapper's function is the one the engine kept (its text a prefix of the wrapped script), its last byte is
// the } that closed it, and the error names that brace's line and column.
func (s *Script) unwrapped(source, factory string) error {
	e := &Error{Script: s.name, Kind: KindSyntax, Message: "SyntaxError: a } closes the function oncehook runs the " +
		"script's top level in (it has no { before it): the code after it would run outside it, once per runtime, " +
		"and keep what it holds from one event to the next"}
	at := len(factory) - len(wrapperHead) - 1 // the closing brace's offset in source
	if strings.HasPrefix(factory, wrapperHead) && at >= 0 && at < len(source) &&
		strings.HasPrefix(wrapperHead+source, factory) && source[at] == '}' {
		before := source[:at]
		e.Line = strings.Count(before, "\n") + 1
		e.Column = len(before) - strings.LastIndexByte(before, '\n')
	}
	return e
}

// Name is the script's file (or inline name), as errors call it.
func (s *Script) Name() string { return s.name }

// Digest identifies the script's version: sha256 of its source. An attempt records it beside what was sent.
func (s *Script) Digest() string { return s.digest }

// Hide masks in text the values of the script's env (Options.Env), which it may have put anywhere in
// what it sends: for what is shown of a run (a preview of what it sends, a destination's answer that
// quotes it). A run's own errors and logs are hidden already.
func (s *Script) Hide(text string) string { return s.secrets.Hide(text) }

// Close closes the idle runtimes; runs in flight close theirs when they end. A closed script still runs
// (each run on a runtime of its own), so a reload may close the scripts it replaced at once.
func (s *Script) Close() {
	s.mu.Lock()
	idle := s.idle
	s.idle = nil
	s.closed = true
	if s.release != nil {
		s.release.Stop()
		s.release = nil
	}
	s.mu.Unlock()
	for _, v := range idle {
		v.vm.Close()
	}
}

func newSandbox() (*quickjs.VM, error) {
	vm, err := quickjs.NewVM()
	if err != nil {
		return nil, fmt.Errorf("new runtime: %w", err)
	}
	if _, err := vm.Eval(sandboxJS, quickjs.EvalGlobal); err != nil {
		vm.Close()
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	return vm, nil
}

func (s *Script) newRuntime() (*quickjs.VM, error) {
	vm, err := newSandbox()
	if err != nil {
		return nil, fmt.Errorf("transform %s: %w", s.name, err)
	}
	vm.SetEvalTimeout(s.opts.Timeout)
	vm.SetMemoryLimit(uintptr(s.opts.MaxMemory))
	if _, err := vm.EvalBytecode(s.bytecode); err != nil {
		vm.Close()
		return nil, s.scriptError(KindRuntime, err, 0)
	}
	// Before the script ever runs, always: process.env is set once per runtime, and a script that got to
	// set it first would keep what it set from one event to the next.
	if _, err := vm.Call("__oncehook_env", s.env); err != nil {
		vm.Close()
		return nil, fmt.Errorf("transform %s: env: %w", s.name, err)
	}
	return vm, nil
}

// get takes the runtime used last (the warmest), or makes one.
func (s *Script) get() (*quickjs.VM, error) {
	s.mu.Lock()
	if n := len(s.idle); n > 0 {
		vm := s.idle[n-1].vm
		s.idle = s.idle[:n-1]
		s.mu.Unlock()
		return vm, nil
	}
	s.mu.Unlock()
	return s.newRuntime()
}

func (s *Script) put(vm *quickjs.VM) {
	s.mu.Lock()
	if !s.closed && len(s.idle) < s.opts.Concurrency {
		s.idle = append(s.idle, idleVM{vm: vm, since: time.Now()})
		if s.release == nil {
			s.release = time.AfterFunc(s.opts.IdleRelease, s.releaseIdle)
		}
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	vm.Close()
}

// releaseIdle closes the runtimes unused for IdleRelease, and looks again when the next one will have been.
// The oldest are first in idle (get takes from the end).
func (s *Script) releaseIdle() {
	s.mu.Lock()
	cutoff := time.Now().Add(-s.opts.IdleRelease)
	n := 0
	for n < len(s.idle) && !s.idle[n].since.After(cutoff) {
		n++
	}
	old := slices.Clone(s.idle[:n])
	s.idle = slices.Delete(s.idle, 0, n)
	s.release = nil
	if len(s.idle) > 0 && !s.closed {
		s.release = time.AfterFunc(s.idle[0].since.Sub(cutoff), s.releaseIdle)
	}
	s.mu.Unlock()
	for _, v := range old {
		v.vm.Close()
	}
}

// Closed reports whether Close was called: a script the running config still runs must never be (each
// of its runs would then make a runtime of its own, milliseconds an event).
func (s *Script) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// idleRuntimes is how many runtimes the script keeps now.
func (s *Script) idleRuntimes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.idle)
}

// Request is what the destination would receive without the transformation.
type Request struct {
	// URL is the destination's URL: the script sees its path and query (Svix: the whole URL).
	URL         *url.URL
	Header      http.Header
	ContentType string
	Body        []byte
}

// Event is what the script's context says about the event being delivered.
type Event struct {
	Source, Key, Type, Destination string
	Attempt                        int
	ReceivedAt                     time.Time
}

// Output is what the destination receives instead.
type Output struct {
	// Skip: the script returned null (Hookdeck) or set cancel (Svix): this destination does not get this event.
	Skip        bool
	Header      http.Header
	ContentType string
	Body        []byte
	// Path and Query replace the destination URL's ("" / nil: unchanged).
	Path  string
	Query url.Values
	// Dropped are the headers the script set that are not its to set (Reserved): not sent, the
	// request's own value (if any) in their place; by name.
	Dropped []Dropped
	// Logs are what the script wrote with console.log (at most 50 lines).
	Logs []string
	// Took is how long the run took, in the script.
	Took time.Duration
}

// Digest identifies what was sent: sha256 over the path, the query, the content type, the headers (sorted)
// and the body, so that two attempts (or two replicas) that sent the same bytes record the same digest. The
// headers that differ by attempt whatever the script does (X-Oncehook-Attempt, a trace's traceparent and
// tracestate) are left out.
func (o *Output) Digest() string {
	h := sha256.New()
	if o.Skip {
		h.Write([]byte("skip"))
		return "sha256:" + hex.EncodeToString(h.Sum(nil))
	}
	fmt.Fprintf(h, "path %q\nquery %q\ncontent-type %q\n", o.Path, o.Query.Encode(), o.ContentType)
	names := make([]string, 0, len(o.Header))
	for k := range o.Header {
		if !perAttempt(k) {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(h, "%s: %q\n", k, o.Header[k])
	}
	fmt.Fprintf(h, "body %d\n", len(o.Body))
	h.Write(o.Body)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// perAttempt says whether a header differs from one attempt to the next by itself.
func perAttempt(canonical string) bool {
	switch canonical {
	case "X-Oncehook-Attempt", "Traceparent", "Tracestate":
		return true
	}
	return false
}

// input is what the sandbox's __oncehook_run reads.
type input struct {
	Now         int64             `json:"now"`
	Seed        [4]uint32         `json:"seed"`
	Headers     map[string]string `json:"headers"`
	JSON        bool              `json:"json"`
	Query       string            `json:"query"`
	ParsedQuery map[string]any    `json:"parsed_query"`
	Path        string            `json:"path"`
	URL         string            `json:"url"`
	Context     map[string]any    `json:"context"`
}

// output is the first line of what __oncehook_run answers.
type output struct {
	Skip    bool            `json:"skip"`
	Shape   string          `json:"shape"`
	Headers json.RawMessage `json:"headers"`
	Query   json.RawMessage `json:"query"`
	Path    *string         `json:"path"`
	Method  string          `json:"method"`
	URL     *string         `json:"url"`
	Kind    string          `json:"kind"`
	Same    bool            `json:"same"`
	Logs    []string        `json:"logs"`
}

// Run runs the script on one event. The error, when the script failed or went past a bound, is an *Error:
// the event's problem, never the gateway's (a delivery dead-letters it). ctx's end interrupts the run.
func (s *Script) Run(ctx context.Context, r Request, ev Event) (out *Output, err error) {
	if s.secrets != nil {
		// What a run shows (its error, its logs) never shows the env's values: a script that throws
		// or logs one would put a secret in a dead letter, a log line or the dashboard.
		defer func() {
			var se *Error
			if errors.As(err, &se) {
				se.Message = s.secrets.Hide(se.Message)
			}
			if out != nil {
				for i, l := range out.Logs {
					out.Logs[i] = s.secrets.Hide(l)
				}
			}
		}()
	}
	if err := ctx.Err(); err != nil {
		// (An interrupt asked before the call would be cleared as it starts.)
		return nil, fmt.Errorf("transform %s: %w", s.name, err)
	}
	in, isJSON, err := s.buildInput(r, ev)
	if err != nil {
		return nil, err
	}
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("transform %s: %w", s.name, ctx.Err())
	}
	defer func() { <-s.slots }()
	vm, err := s.get()
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, vm.Interrupt)
	start := time.Now()
	res, runErr := vm.Call("__oncehook_run", in)
	took := time.Since(start)
	// A run that left jobs queued (a promise's then, an async function's await) left them to hold memory in
	// the runtime: never run, they would pile up over the events a reused runtime runs, until an event that
	// is fine alone failed for the memory its predecessors kept. The engine only says there were some by
	// running them, which it does within the same bounds, and after the run's answer is taken.
	pending := false
	if runErr == nil {
		n, _ := vm.ExecutePendingJobs()
		pending = n > 0
	}
	if !stop() || runErr != nil || pending {
		// An interrupt may still be on its way (a reused runtime must not get it), a runtime whose run
		// failed may be left in any state (out of memory, half-built objects), and one that ran a job ran
		// the script's code past the run's end: none is reused.
		vm.Close()
	} else {
		s.put(vm)
	}
	if runErr != nil {
		kind := KindRuntime
		msg := runErr.Error()
		switch {
		case ctx.Err() != nil && strings.Contains(msg, "interrupted"):
			return nil, fmt.Errorf("transform %s: %w", s.name, ctx.Err())
		case strings.Contains(msg, "interrupted"):
			kind = KindTimeout
		case strings.Contains(msg, "out of memory"), strings.Contains(msg, "string too long"),
			strings.Contains(msg, "invalid array length"):
			kind = KindMemory
		case strings.Contains(msg, "stack overflow"):
			kind = KindStack
		}
		return nil, s.scriptError(kind, runErr, took)
	}
	text, ok := res.(string)
	if !ok {
		return nil, &Error{Script: s.name, Kind: KindRuntime, Message: fmt.Sprintf("the sandbox answered %T", res)}
	}
	if int64(len(text)) > s.opts.MaxOutput+64<<10 {
		return nil, &Error{Script: s.name, Kind: KindOutput, Took: took,
			Message: fmt.Sprintf("the output is %d bytes, over the limit of %d", len(text), s.opts.MaxOutput)}
	}
	out, err = s.readOutput(text, r, isJSON)
	if err != nil {
		return nil, err
	}
	out.Took = took
	return out, nil
}

func (s *Script) buildInput(r Request, ev Event) (string, bool, error) {
	u := r.URL
	if u == nil {
		u = &url.URL{Path: "/"}
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	headers := make(map[string]string, len(r.Header))
	for k, v := range r.Header {
		headers[strings.ToLower(k)] = strings.Join(v, ", ")
	}
	if r.ContentType != "" {
		if _, ok := headers["content-type"]; !ok {
			headers["content-type"] = r.ContentType
		}
	}
	pq := map[string]any{}
	for k, v := range u.Query() {
		if len(v) == 1 {
			pq[k] = v[0]
		} else {
			pq[k] = v
		}
	}
	seed := sha256.Sum256([]byte(ev.Source + "\x00" + ev.Key))
	in := input{
		Now:         ev.ReceivedAt.UnixMilli(),
		Headers:     headers,
		Query:       u.RawQuery,
		ParsedQuery: pq,
		Path:        path,
		URL:         u.String(),
		Context: map[string]any{
			"source":      ev.Source,
			"key":         ev.Key,
			"type":        ev.Type,
			"destination": ev.Destination,
			"attempt":     ev.Attempt,
			"received_at": ev.ReceivedAt.UTC().Format(time.RFC3339Nano),
		},
	}
	for i := range in.Seed {
		in.Seed[i] = binary.LittleEndian.Uint32(seed[4*i:])
	}
	isJSON := looksJSON(r.Body, r.ContentType)
	in.JSON = isJSON
	body := r.Body
	if !isJSON {
		b, err := json.Marshal(string(r.Body))
		if err != nil {
			return "", false, fmt.Errorf("transform %s: body: %w", s.name, err)
		}
		body = b
	}
	meta, err := json.Marshal(in)
	if err != nil {
		return "", false, fmt.Errorf("transform %s: input: %w", s.name, err)
	}
	// The body goes in as it is (looksJSON validated it): through json.Marshal, a RawMessage is scanned
	// and compacted once more, a third of the input's cost on a 2 KiB event.
	var b strings.Builder
	b.Grow(len(meta) + len(body) + 8)
	b.WriteString(`{"body":`)
	b.Write(body)
	b.WriteByte(',')
	b.Write(meta[1:])
	return b.String(), isJSON, nil
}

// looksJSON: the body is given to the script parsed when it is one JSON value that opens an object or an
// array, or any JSON value under a JSON content type.
func looksJSON(b []byte, contentType string) bool {
	t := bytes.TrimLeft(b, " \t\r\n")
	if len(t) == 0 {
		return false
	}
	if t[0] != '{' && t[0] != '[' && !strings.Contains(strings.ToLower(contentType), "json") {
		return false
	}
	return json.Valid(b)
}

func (s *Script) readOutput(text string, r Request, wasJSON bool) (*Output, error) {
	head, body, _ := strings.Cut(text, "\n")
	var o output
	if err := json.Unmarshal([]byte(head), &o); err != nil {
		return nil, &Error{Script: s.name, Kind: KindRuntime, Message: "the sandbox's answer: " + err.Error()}
	}
	out := &Output{Logs: o.Logs}
	if o.Skip {
		out.Skip = true
		return out, nil
	}

	// Headers: Hookdeck's request.headers is the whole set (a header left out is not sent); Svix's
	// webhook.headers are set over the endpoint's.
	header, setCT, dropped, err := s.outputHeaders(o, r)
	if err != nil {
		return nil, err
	}
	out.Header, out.Dropped = header, dropped
	out.Header.Del("Content-Type")

	// Body.
	switch {
	case o.Same:
		out.Body = r.Body
	case o.Kind == "none":
		out.Body = nil
	default:
		out.Body = []byte(body)
	}
	out.ContentType = r.ContentType
	switch {
	case setCT != "":
		out.ContentType = setCT
	case o.Kind == "json" && !(o.Same && wasJSON && r.ContentType != ""):
		out.ContentType = "application/json"
	}
	if int64(len(out.Body)) > s.opts.MaxOutput {
		return nil, &Error{Script: s.name, Kind: KindOutput,
			Message: fmt.Sprintf("the body is %d bytes, over the limit of %d", len(out.Body), s.opts.MaxOutput)}
	}

	// Path and query.
	if err := s.outputTarget(o, r, out); err != nil {
		return nil, err
	}
	size := len(out.Body)
	for k, v := range out.Header {
		size += len(k)
		for _, x := range v {
			size += len(x)
		}
	}
	if int64(size) > s.opts.MaxOutput {
		return nil, &Error{Script: s.name, Kind: KindOutput,
			Message: fmt.Sprintf("the output is %d bytes, over the limit of %d", size, s.opts.MaxOutput)}
	}
	return out, nil
}

// outputHeaders is the headers the script's answer sends: the request's, as the script's shape sets
// them, less those a transformation may not change (which it reports as dropped); and the content type
// it set, if any.
func (s *Script) outputHeaders(o output, r Request) (http.Header, string, []Dropped, error) {
	header := r.Header.Clone()
	if header == nil {
		header = http.Header{}
	}
	setCT := ""
	var dropped []Dropped
	if len(o.Headers) > 0 && string(o.Headers) != "null" {
		var hs map[string]json.RawMessage
		if err := json.Unmarshal(o.Headers, &hs); err != nil {
			return nil, "", nil, s.invalid("headers must be an object of names to values")
		}
		next := http.Header{}
		if o.Shape == "svix" {
			next = header
		}
		// Two names for one header (the lowercased x-env the script was given, and the X-Env it set): the
		// one that changed the value wins, whatever a map's order (which changes by run); two changes
		// that disagree are the script's error.
		names := make([]string, 0, len(hs))
		for name := range hs {
			names = append(names, name)
		}
		sort.Strings(names)
		byCanon := make(map[string]string, len(names))
		for _, name := range names {
			c := http.CanonicalHeaderKey(name)
			prev, ok := byCanon[c]
			if !ok {
				byCanon[c] = name
				continue
			}
			a, errA := headerValues(hs[prev])
			b, errB := headerValues(hs[name])
			was := strings.Join(r.Header[c], ", ")
			if c == "Content-Type" && len(r.Header[c]) == 0 {
				was = r.ContentType
			}
			switch {
			case errA != nil || errB != nil || strings.Join(a, ", ") == strings.Join(b, ", "):
				// Let the loop below report a bad value; equal ones are one header.
			case strings.Join(b, ", ") == was:
				// name is the header as given; prev changed it.
			case strings.Join(a, ", ") == was:
				byCanon[c] = name
			default:
				return nil, "", nil, s.invalid("headers %q and %q are one header with two values: set it under one name", prev, name)
			}
		}
		for _, name := range names {
			if byCanon[http.CanonicalHeaderKey(name)] != name {
				continue
			}
			raw := hs[name]
			vals, err := headerValues(raw)
			if err != nil {
				return nil, "", nil, s.invalid("header %q: %v", name, err)
			}
			if !httpguts.ValidHeaderFieldName(name) { // as net/http's client checks it: a name it refuses would fail at the send
				return nil, "", nil, s.invalid("header name %q is not a valid HTTP header name", name)
			}
			for _, v := range vals {
				if !httpguts.ValidHeaderFieldValue(v) { // likewise: a value it refuses fails as a network error, retried, where it is the script's
					return nil, "", nil, s.invalid("header %q: its value has a control character (a CR, LF, NUL or another, which HTTP does not allow)", name)
				}
			}
			canon := http.CanonicalHeaderKey(name)
			if canon == "Content-Type" {
				// The request's own content type, handed back as it came (a script that returns
				// request.headers), is not the script setting one.
				if len(vals) > 0 && vals[0] != r.ContentType {
					setCT = vals[0]
				}
				continue
			}
			if folded := http.CanonicalHeaderKey(strings.ReplaceAll(name, "_", "-")); folded != canon {
				if why := Reserved(folded, s.opts.Transport); why != "" {
					// Servers behind CGI, WSGI or some proxies read _ as -:
					// Idempotency_Key would be their Idempotency-Key.
					dropped = append(dropped, Dropped{Header: canon, Why: "a server that reads _ as - would take it for " + folded + ": " + why})
					continue
				}
			}
			if why := Reserved(canon, s.opts.Transport); why != "" {
				if strings.Join(vals, ", ") != strings.Join(r.Header[canon], ", ") {
					dropped = append(dropped, Dropped{Header: canon, Why: why})
				}
				continue
			}
			next[canon] = vals
		}
		if o.Shape != "svix" {
			// The reserved headers travel whether or not the script kept them.
			for k, v := range header {
				if Reserved(k, s.opts.Transport) != "" {
					next[k] = v
				}
			}
		}
		header = next
	}
	return header, setCT, dropped, nil
}

// outputTarget sets the path and the query the script's answer changed: within the destination's
// scheme and host, which a transformation never changes.
func (s *Script) outputTarget(o output, r Request, out *Output) error {
	orig := r.URL
	if orig == nil {
		orig = &url.URL{Path: "/"}
	}
	if o.Shape == "svix" {
		if o.Method != "" && o.Method != "POST" {
			return s.invalid("webhook.method %q: oncehook delivers with POST only", o.Method)
		}
		if o.URL != nil && *o.URL != orig.String() {
			u, err := url.Parse(*o.URL)
			if err != nil || !u.IsAbs() {
				return s.invalid("webhook.url %q is not an absolute URL", *o.URL)
			}
			if u.Scheme != orig.Scheme || u.Host != orig.Host {
				return s.invalid("webhook.url %q: a transformation may change the destination's path and query, not its scheme or host (%s://%s): configure another destination", *o.URL, orig.Scheme, orig.Host)
			}
			if u.EscapedPath() != orig.EscapedPath() {
				out.Path = u.EscapedPath()
			}
			if u.RawQuery != orig.RawQuery {
				q, err := url.ParseQuery(u.RawQuery)
				if err != nil {
					return s.invalid("webhook.url's query: %v", err)
				}
				out.Query = q
			}
		}
	} else {
		if o.Path != nil && *o.Path != orig.EscapedPath() && !(*o.Path == "/" && orig.EscapedPath() == "") {
			p := *o.Path
			if !strings.HasPrefix(p, "/") {
				return s.invalid("path %q must start with /", p)
			}
			if _, err := url.Parse(p); err != nil || strings.ContainsAny(p, "?#") {
				return s.invalid("path %q is not a URL path (the query goes in request.query)", p)
			}
			out.Path = p
		}
		if len(o.Query) > 0 && string(o.Query) != "null" {
			q, err := queryValues(o.Query)
			if err != nil {
				return s.invalid("query: %v", err)
			}
			if q.Encode() != orig.Query().Encode() {
				if q == nil {
					q = url.Values{}
				}
				out.Query = q
			}
		}
	}
	return nil
}

// invalid is the error of an answer the script gave that oncehook cannot send.
func (s *Script) invalid(format string, a ...any) error {
	return &Error{Script: s.name, Kind: KindInvalid, Message: fmt.Sprintf(format, a...)}
}

func headerValues(raw json.RawMessage) ([]string, error) {
	var one any
	if err := json.Unmarshal(raw, &one); err != nil {
		return nil, err
	}
	switch v := one.(type) {
	case string:
		return []string{v}, nil
	case float64:
		return []string{strconv.FormatFloat(v, 'f', -1, 64)}, nil
	case bool:
		return []string{strconv.FormatBool(v)}, nil
	case []any:
		out := make([]string, 0, len(v))
		for _, x := range v {
			str, ok := x.(string)
			if !ok {
				return nil, errors.New("an array of values must hold strings")
			}
			out = append(out, str)
		}
		return out, nil
	case nil:
		return nil, nil
	}
	return nil, errors.New("a value must be a string, a number or an array of strings")
}

func queryValues(raw json.RawMessage) (url.Values, error) {
	var str string
	if json.Unmarshal(raw, &str) == nil {
		return url.ParseQuery(strings.TrimPrefix(str, "?"))
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, errors.New("must be a query string or an object of names to values")
	}
	q := url.Values{}
	for k, v := range obj {
		switch x := v.(type) {
		case string:
			q.Add(k, x)
		case float64:
			q.Add(k, strconv.FormatFloat(x, 'f', -1, 64))
		case bool:
			q.Add(k, strconv.FormatBool(x))
		case nil:
		case []any:
			for _, y := range x {
				str, ok := y.(string)
				if !ok {
					return nil, fmt.Errorf("%q: an array of values must hold strings", k)
				}
				q.Add(k, str)
			}
		default:
			return nil, fmt.Errorf("%q: a value must be a string, a number or an array of strings", k)
		}
	}
	return q, nil
}

// Dropped is a header a script set that is not its to set, and why.
type Dropped struct{ Header, Why string }

// Reserved says why a header is not a transformation's (nor a destination's headers:) to set, "" when it
// is: one of every destination's (Protected), or one its transport reads as its own (transport, nil for
// none). The one rule for both, wherever a header is set on a delivery.
//
// A script's value for one is dropped, not refused: the event is delivered without it (the request's own
// value in its place), since a script that sets it sets it for every event, and refusing would
// dead-letter every event of the destination. oncehook transform test says which it dropped and why.
func Reserved(canonical string, transport func(string) string) string {
	if Protected(canonical) {
		return protectedWhy(canonical)
	}
	if transport != nil {
		return transport(canonical)
	}
	return ""
}

// Protected says whether a header is beyond a transformation's reach on every destination: the key the
// destination dedupes on (invariant 8), the Standard Webhooks signature oncehook computes over what is
// sent, oncehook's own X-Oncehook-* headers, and what belongs to the connection rather than the message
// (hop-by-hop headers, Host, Content-Length).
func Protected(canonical string) bool {
	switch canonical {
	case "Idempotency-Key", "Webhook-Id", "Webhook-Timestamp", "Webhook-Signature",
		"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade", "Te", "Trailer",
		"Proxy-Authenticate", "Proxy-Authorization", "Host", "Content-Length":
		return true
	}
	return strings.HasPrefix(canonical, "X-Oncehook-")
}

func protectedWhy(canonical string) string {
	switch {
	case canonical == "Idempotency-Key":
		return "oncehook's: the key the destination dedupes on"
	case strings.HasPrefix(canonical, "Webhook-"):
		return "oncehook's: it signs what is sent, after the transformation"
	case strings.HasPrefix(canonical, "X-Oncehook-"):
		return "oncehook's own"
	case canonical == "Host" || canonical == "Content-Length":
		return "HTTP's: it is set from the URL and the body"
	}
	return "HTTP's: a hop-by-hop header belongs to the connection, not the message"
}
