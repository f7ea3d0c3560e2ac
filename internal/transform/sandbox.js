// The sandbox every transformation runs in, evaluated once per runtime before the script. It makes the
// runtime a pure function of the event (invariant 21): the clock is the event's received time, randomness
// is seeded from its key, there is no I/O to reach (QuickJS's base has no fetch, require, timers or files;
// the std/os modules are never loaded), and nothing a run leaves behind reaches the next one: the script's
// top level runs afresh for every event (it is wrapped in a function), the built-ins and the globals are
// frozen, and the globals a run adds are deleted when it ends.
//
// Every function here is named __oncehook_*: an error's stack then tells the script's frames (what the
// error's line is read from) from the sandbox's. The script's own top level runs as __oncehook_factory.
"use strict";
// Everything the sandbox keeps is in this closure: a script can reach none of it but __oncehook_run, which
// it cannot replace (nor __oncehook_factory, its own top level, sealed before the first run).
(function __oncehook_setup(g) {
  let now = 0;
  let rand = [0, 0, 0, 0];
  let logs = [];
  let logbytes = 0;
  let deepFreeze;

  const RealDate = Date;
  // Date: new Date() and Date.now() are the event's received time; new Date(x) is x, as ever.
  const FixedDate = function __oncehook_Date(...args) {
    if (!new.target) return new RealDate(now).toString();
    if (args.length === 0) return Reflect.construct(RealDate, [now], new.target);
    return Reflect.construct(RealDate, args, new.target);
  };
  Object.defineProperty(FixedDate, "prototype", { value: RealDate.prototype });
  FixedDate.now = function __oncehook_now() { return now; };
  FixedDate.parse = RealDate.parse;
  FixedDate.UTC = RealDate.UTC;
  Object.defineProperty(RealDate.prototype, "constructor", { value: FixedDate, writable: false });
  g.Date = FixedDate;

  // Math.random: sfc32, seeded per run from the event's key (the same key, the same sequence).
  Math.random = function __oncehook_random() {
    const s = rand;
    s[0] >>>= 0; s[1] >>>= 0; s[2] >>>= 0; s[3] >>>= 0;
    let t = (s[0] + s[1]) | 0;
    s[0] = s[1] ^ (s[1] >>> 9);
    s[1] = (s[2] + (s[2] << 3)) | 0;
    s[2] = (s[2] << 21) | (s[2] >>> 11);
    s[3] = (s[3] + 1) | 0;
    t = (t + s[3]) | 0;
    s[2] = (s[2] + t) | 0;
    return (t >>> 0) / 4294967296;
  };

  // console: kept (Hookdeck's scripts log), bounded, returned to the caller (oncehook transform test shows it).
  const log = function __oncehook_log(...args) {
    if (logs.length >= 50 || logbytes > 16384) return;
    let line = args.map(function __oncehook_fmt(a) {
      if (typeof a === "string") return a;
      try { return JSON.stringify(a); } catch (e) { return String(a); }
    }).join(" ");
    if (line.length > 1024) line = line.slice(0, 1024) + "…";
    logbytes += line.length;
    logs.push(line);
  };
  g.console = { log, info: log, warn: log, error: log, debug: log };

  // Nothing that reaches out: none of these exist in QuickJS's base, but a later engine version must not
  // bring them in unnoticed.
  for (const n of ["fetch", "require", "process", "setTimeout", "setInterval", "setImmediate", "queueMicrotask",
    "XMLHttpRequest", "WebSocket", "std", "os", "Worker", "SharedArrayBuffer", "Atomics", "WeakRef",
    "FinalizationRegistry"]) {
    delete g[n];
  }

  // What a run could leave to the next, made impossible or undone: the built-ins are frozen (no changed
  // Array.prototype, JSON or Math carries over), every global there is now can be neither replaced nor
  // deleted, no global can be defined out of sight (defineProperty and setPrototypeOf on the global object
  // are refused), and the enumerable globals a run adds (a sloppy script's undeclared assignment, x = 1) are
  // deleted when it ends. Only enumerable keys are compared after a run: Object.keys is cheap, where
  // comparing every property's descriptor cost some 200 µs a run.
  const refuse = function __oncehook_refuse(what) {
    throw new TypeError(what + " on the global object: a transformation's globals would outlive its event");
  };
  const defineProperty = Object.defineProperty;
  const defineProperties = Object.defineProperties;
  const reflectDefine = Reflect.defineProperty;
  const setPrototypeOf = Object.setPrototypeOf;
  const reflectSetPrototypeOf = Reflect.setPrototypeOf;
  const protoSetter = Object.getOwnPropertyDescriptor(Object.prototype, "__proto__").set;
  const defineGetter = Object.prototype.__defineGetter__;
  const defineSetter = Object.prototype.__defineSetter__;
  Object.defineProperty = function __oncehook_defineProperty(o, k, d) { if (o === g) refuse("defineProperty"); return defineProperty(o, k, d); };
  Object.defineProperties = function __oncehook_defineProperties(o, ds) { if (o === g) refuse("defineProperties"); return defineProperties(o, ds); };
  Reflect.defineProperty = function __oncehook_reflectDefine(o, k, d) { if (o === g) refuse("defineProperty"); return reflectDefine(o, k, d); };
  Object.setPrototypeOf = function __oncehook_setPrototypeOf(o, p) { if (o === g) refuse("setPrototypeOf"); return setPrototypeOf(o, p); };
  Reflect.setPrototypeOf = function __oncehook_reflectSetPrototypeOf(o, p) { if (o === g) refuse("setPrototypeOf"); return reflectSetPrototypeOf(o, p); };
  defineProperty(Object.prototype, "__proto__", { set: function __oncehook_proto(p) { if (this === g) refuse("__proto__"); protoSetter.call(this, p); } });
  Object.prototype.__defineGetter__ = function __oncehook_defineGetter(k, f) { if (this === g) refuse("__defineGetter__"); return defineGetter.call(this, k, f); };
  Object.prototype.__defineSetter__ = function __oncehook_defineSetter(k, f) { if (this === g) refuse("__defineSetter__"); return defineSetter.call(this, k, f); };
  // Freezing, sealing or making the global object non-extensible would outlive the run too (the next run
  // could tell, and its sloppy assignments would fail), and would keep restore from deleting what it added.
  const freeze = Object.freeze;
  const seal = Object.seal;
  const preventExtensions = Object.preventExtensions;
  const reflectPreventExtensions = Reflect.preventExtensions;
  Object.freeze = function __oncehook_freeze(o) { if (o === g) refuse("freeze"); return freeze(o); };
  Object.seal = function __oncehook_seal(o) { if (o === g) refuse("seal"); return seal(o); };
  Object.preventExtensions = function __oncehook_preventExtensions(o) { if (o === g) refuse("preventExtensions"); return preventExtensions(o); };
  Reflect.preventExtensions = function __oncehook_reflectPreventExtensions(o) { if (o === g) refuse("preventExtensions"); return reflectPreventExtensions(o); };

  // process.env: the values the destination's transform.env names, as Hookdeck's scripts read their
  // environment, and nothing else of Node's process. The Go side sets them once per runtime, before the
  // script first runs (__oncehook_env; a second call is refused, so a script cannot set its own); frozen,
  // so a run cannot change what the next one reads. A read of a name that is not set throws an error that
  // names it, where Node would give undefined and the script fail further on with a TypeError about
  // undefined (or send the text "undefined" as an API key); "NAME" in process.env tells whether it is set.
  const RealProxy = Proxy;
  const reflectGet = Reflect.get;
  const jsonParse = JSON.parse;
  const makeEnv = function __oncehook_makeEnv(values, has) {
    const target = {};
    for (const k of Object.keys(values)) target[k] = String(values[k]);
    freeze(target);
    return freeze(new RealProxy(target, freeze({
      get: function __oncehook_envGet(t, k, receiver) {
        // toJSON: JSON.stringify(process.env) (console.log does it) asks for it.
        if (typeof k !== "string" || k in t || k === "toJSON") return reflectGet(t, k, receiver);
        throw new ReferenceError("process.env." + k + " is not set: the destination's transform.env " + has);
      },
    })));
  };
  let proc;
  const setEnv = function __oncehook_env(text) {
    if (proc !== undefined) throw new TypeError("process.env is set once");
    const e = jsonParse(text);
    proc = freeze({ env: makeEnv(e.values, e.has) });
  };
  defineProperty(g, "__oncehook_env", { value: setEnv, writable: false, configurable: false, enumerable: false });
  defineProperty(g, "process", { get: function __oncehook_process() { return proc; }, configurable: false, enumerable: false });

  for (const n of Object.getOwnPropertyNames(g)) {
    const d = Object.getOwnPropertyDescriptor(g, n);
    if ("value" in d) defineProperty(g, n, { writable: false, configurable: false });
    else defineProperty(g, n, { configurable: false });
  }

  // The enumerable globals before the first run (the script's __oncehook_factory among them).
  let base;
  const restore = function __oncehook_restore() {
    for (const n of Object.keys(g)) {
      if (!base.has(n)) delete g[n];
    }
    // A symbol-keyed global (globalThis[Symbol.for("n")] = 1) is not in Object.keys.
    for (const n of Object.getOwnPropertySymbols(g)) {
      if (!base.has(n)) delete g[n];
    }
  };

  const kind = function __oncehook_kind(v) {
    if (v === undefined || v === null) return "none";
    return typeof v === "string" ? "string" : "json";
  };

  // __oncehook_run runs the script on one event. input is the JSON the Go side built (see input in
  // transform.go); the answer is one line of JSON (what to send, apart from the body), a newline, and the
  // body's text.
  const run = function __oncehook_run(input) {
    const inp = JSON.parse(input);
    if (base === undefined) {
      // The script's top level, a global function once its bytecode is loaded, is the sandbox's to call:
      // no run may replace it.
      defineProperty(g, "__oncehook_factory", { writable: false, configurable: false });
      deepFreeze([__oncehook_factory]);
      base = new Set(Object.keys(g).concat(Object.getOwnPropertySymbols(g)));
    }
    now = inp.now;
    rand = inp.seed;
    logs = [];
    logbytes = 0;
    try {
      let transform;
      const addHandler = function __oncehook_addHandler(name, fn) {
        if (name !== "transform") throw new TypeError(`addHandler("${name}"): oncehook runs only "transform" handlers`);
        if (typeof fn !== "function") throw new TypeError('addHandler("transform", fn): fn is not a function');
        transform = fn;
      };
      const made = __oncehook_factory(addHandler);
      const bodyText = inp.json ? JSON.stringify(inp.body) : inp.body;
      let meta;
      let out;
      if (transform !== undefined) {
        // Hookdeck: request = {headers, body, query, parsed_query, path}, context = the event.
        const request = { headers: inp.headers, body: inp.body, query: inp.query, parsed_query: inp.parsed_query, path: inp.path };
        const pq = JSON.stringify(inp.parsed_query);
        const r = transform(request, inp.context);
        if (r === null || r === false) return JSON.stringify({ skip: true, logs }) + "\n";
        if (r === undefined) throw new TypeError("the transform handler returned undefined: return the request, or null to skip this destination");
        if (typeof r !== "object") throw new TypeError(`the transform handler returned a ${typeof r}: return the request, or null to skip this destination`);
        if (typeof r.then === "function") throw new TypeError("the transform handler returned a promise: transformations run synchronously (no async, as in Hookdeck)");
        let query = r.query;
        if (r.parsed_query !== undefined && JSON.stringify(r.parsed_query) !== pq) query = r.parsed_query;
        meta = { shape: "hookdeck", headers: r.headers, query: query === undefined ? null : query, path: r.path === undefined ? null : r.path };
        out = r.body;
      } else if (made !== undefined && typeof made === "function") {
        // Svix: webhook = {method, url, payload, eventType}; it may set cancel and headers.
        const webhook = { method: "POST", url: inp.url, payload: inp.body, eventType: inp.context.type };
        const w = made(webhook);
        if (w === null || w === false) return JSON.stringify({ skip: true, logs }) + "\n";
        if (w === undefined || typeof w !== "object") throw new TypeError("handler(webhook) must return the webhook object (Svix's WebhookObject)");
        if (w.cancel === true) return JSON.stringify({ skip: true, logs }) + "\n";
        meta = { shape: "svix", method: w.method === undefined ? "POST" : w.method, url: w.url === undefined ? null : w.url, headers: w.headers === undefined ? null : w.headers };
        out = w.payload;
      } else {
        throw new TypeError('the script defines no transformation: call addHandler("transform", (request, context) => request) (Hookdeck) or declare function handler(webhook) (Svix)');
      }
      meta.kind = kind(out);
      let text = "";
      if (meta.kind === "string") {
        text = out;
      } else if (meta.kind === "json") {
        text = JSON.stringify(out);
        if (text === undefined) throw new TypeError("the body cannot be written as JSON (a function or a symbol?)");
      }
      // The body as it came, unchanged: send the original bytes (no re-encoding of its numbers or spacing).
      meta.same = meta.kind === (inp.json ? "json" : "string") && text === bodyText;
      meta.logs = logs;
      return JSON.stringify(meta) + "\n" + (meta.same ? "" : text);
    } finally {
      restore();
    }
  };
  defineProperty(g, "__oncehook_run", { value: run, writable: false, configurable: false, enumerable: false });

  // __oncehook_source is the text of the script's top level as the engine parsed it. The Go side compares it
  // with the wrapped script when it compiles: a script with a } too many closes the wrapper early, and the
  // code after it would run once per runtime at the global level, keeping what it holds from one event to the
  // next. The functions it calls are taken here, before any script runs.
  const fnToString = Function.prototype.toString;
  const apply = Reflect.apply;
  const ownDescriptor = Object.getOwnPropertyDescriptor;
  const source = function __oncehook_source() {
    const d = ownDescriptor(g, "__oncehook_factory");
    return d !== undefined && typeof d.value === "function" ? apply(fnToString, d.value, []) : "";
  };
  defineProperty(g, "__oncehook_source", { value: source, writable: false, configurable: false, enumerable: false });

  // Every object a script can reach without making it is frozen, deeply: not only the built-ins but their
  // methods (a function is an object: JSON.parse.n = 1 would outlive the run), their accessors, their
  // prototypes, the sandbox's own functions, and the intrinsics only syntax reaches (the iterators'
  // prototypes, the generators' and async functions' constructors and prototypes). The global object itself
  // stays extensible (a sloppy script's x = 1 works, and restore deletes it).
  deepFreeze = function __oncehook_deepFreeze(roots) {
    const seen = new Set([g]);
    const todo = roots.slice();
    while (todo.length > 0) {
      const o = todo.pop();
      if ((typeof o !== "object" && typeof o !== "function") || o === null || seen.has(o)) continue;
      seen.add(o);
      freeze(o);
      todo.push(Object.getPrototypeOf(o));
      const fn = typeof o === "function";
      for (const k of Reflect.ownKeys(o)) {
        // A function's length and name are numbers and strings (most of what there is to walk: skipping
        // their descriptors keeps a new runtime's walk to a few milliseconds).
        if (fn && (k === "length" || k === "name")) continue;
        const d = Object.getOwnPropertyDescriptor(o, k);
        if (d.get !== undefined || d.set !== undefined) todo.push(d.get, d.set);
        else todo.push(d.value);
      }
    }
  };
  const hidden = [
    Object.getPrototypeOf([][Symbol.iterator]()),
    Object.getPrototypeOf(""[Symbol.iterator]()),
    Object.getPrototypeOf(new Map()[Symbol.iterator]()),
    Object.getPrototypeOf(new Set()[Symbol.iterator]()),
    Object.getPrototypeOf("".matchAll(/(?:)/g)),
    function* __oncehook_gen() {},
    async function __oncehook_async() {},
    async function* __oncehook_asyncgen() {},
  ];
  if (typeof Iterator === "function" && typeof Iterator.from === "function") {
    hidden.push(Object.getPrototypeOf([].values().map(function __oncehook_id(x) { return x; })));
    hidden.push(Object.getPrototypeOf(Iterator.from({ next: function __oncehook_next() { return { done: true }; } })));
  }
  const roots = hidden.map(function __oncehook_protoOf(o) { return typeof o === "function" ? Object.getPrototypeOf(o) : o; });
  for (const n of Reflect.ownKeys(g)) {
    const d = Object.getOwnPropertyDescriptor(g, n);
    if ("value" in d) roots.push(d.value);
    else roots.push(d.get, d.set);
  }
  roots.push(Object.getPrototypeOf(g));
  deepFreeze(roots);
})(globalThis);
