// The sandbox every transformation runs in, evaluated once per runtime before the script. It makes the
// runtime a pure function of the event (invariant 21): the clock is the event's received time, randomness
// is seeded from its key, there is no I/O to reach (QuickJS's base has no fetch, require, timers or files;
// the std/os modules are never loaded), and nothing a run leaves behind reaches the next one: the script's
// top level runs afresh for every event (it is wrapped in a function), the built-ins are frozen, and globals
// a run adds or replaces are put back when it ends.
//
// Every function here is named __oncehook_*: an error's stack then tells the script's frames (what the
// error's line is read from) from the sandbox's. The script's own top level runs as __oncehook_factory.
"use strict";
var __oncehook_now = 0;
var __oncehook_rand = [0, 0, 0, 0];
var __oncehook_logs = [];
var __oncehook_logbytes = 0;

(function __oncehook_setup(g) {
  const RealDate = Date;
  // Date: new Date() and Date.now() are the event's received time; new Date(x) is x, as ever.
  const FixedDate = function __oncehook_Date(...args) {
    if (!new.target) return new RealDate(__oncehook_now).toString();
    if (args.length === 0) return Reflect.construct(RealDate, [__oncehook_now], new.target);
    return Reflect.construct(RealDate, args, new.target);
  };
  Object.defineProperty(FixedDate, "prototype", { value: RealDate.prototype });
  FixedDate.now = function __oncehook_now_fn() { return __oncehook_now; };
  FixedDate.parse = RealDate.parse;
  FixedDate.UTC = RealDate.UTC;
  Object.defineProperty(RealDate.prototype, "constructor", { value: FixedDate, writable: false });
  g.Date = FixedDate;

  // Math.random: sfc32, seeded per run from the event's key (the same key, the same sequence).
  Math.random = function __oncehook_random() {
    const s = __oncehook_rand;
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
    if (__oncehook_logs.length >= 50 || __oncehook_logbytes > 16384) return;
    let line = args.map(function __oncehook_fmt(a) {
      if (typeof a === "string") return a;
      try { return JSON.stringify(a); } catch (e) { return String(a); }
    }).join(" ");
    if (line.length > 1024) line = line.slice(0, 1024) + "…";
    __oncehook_logbytes += line.length;
    __oncehook_logs.push(line);
  };
  g.console = { log, info: log, warn: log, error: log, debug: log };

  // Nothing that reaches out: none of these exist in QuickJS's base, but a later engine version must not
  // bring them in unnoticed.
  for (const n of ["fetch", "require", "process", "setTimeout", "setInterval", "setImmediate", "queueMicrotask",
    "XMLHttpRequest", "WebSocket", "std", "os", "Worker", "SharedArrayBuffer", "Atomics", "WeakRef",
    "FinalizationRegistry"]) {
    delete g[n];
  }

  // Frozen built-ins: a run cannot leave a changed Array.prototype (or JSON, Math, ...) to the next event.
  for (const n of Object.getOwnPropertyNames(g)) {
    const v = g[n];
    if ((typeof v === "function" || typeof v === "object") && v !== null && v !== g) {
      Object.freeze(v);
      if (typeof v === "function" && v.prototype) Object.freeze(v.prototype);
    }
  }
  Object.freeze(Object.getPrototypeOf(function* __oncehook_gen() {}));
  Object.freeze(Object.getPrototypeOf(async function __oncehook_async() {}));
})(globalThis);

// The globals as they are before any script runs, to put back after each run.
var __oncehook_globals = (function __oncehook_snapshot(g) {
  const m = new Map();
  for (const n of Object.getOwnPropertyNames(g)) m.set(n, Object.getOwnPropertyDescriptor(g, n));
  return m;
})(globalThis);

// The sandbox's own globals, which change per run (or, the factory, are defined after the snapshot).
var __oncehook_own = new Set(["__oncehook_now", "__oncehook_rand", "__oncehook_logs", "__oncehook_logbytes",
  "__oncehook_globals", "__oncehook_own", "__oncehook_factory", "__oncehook_restore", "__oncehook_kind", "__oncehook_run"]);

function __oncehook_restore(g) {
  for (const n of Object.getOwnPropertyNames(g)) {
    if (__oncehook_own.has(n)) continue;
    const d = __oncehook_globals.get(n);
    if (d === undefined) {
      delete g[n];
    } else if (d.value !== g[n] && d.configurable) {
      Object.defineProperty(g, n, d);
    } else if (d.writable && d.value !== g[n]) {
      g[n] = d.value;
    }
  }
}

function __oncehook_kind(v) {
  if (v === undefined || v === null) return "none";
  return typeof v === "string" ? "string" : "json";
}

// __oncehook_run runs the script on one event. input is the JSON the Go side built (see input in
// transform.go); the answer is one line of JSON (what to send, apart from the body), a newline, and the
// body's text.
function __oncehook_run(input) {
  const inp = JSON.parse(input);
  __oncehook_now = inp.now;
  __oncehook_rand = inp.seed;
  __oncehook_logs = [];
  __oncehook_logbytes = 0;
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
      if (r === null || r === false) return JSON.stringify({ skip: true }) + "\n";
      if (r === undefined) throw new TypeError("the transform handler returned undefined: return the request, or null to skip this destination");
      if (typeof r !== "object") throw new TypeError(`the transform handler returned a ${typeof r}: return the request, or null to skip this destination`);
      if (r.then !== undefined && typeof r.then === "function") throw new TypeError("the transform handler returned a promise: transformations run synchronously (no async, as in Hookdeck)");
      let query = r.query;
      if (r.parsed_query !== undefined && JSON.stringify(r.parsed_query) !== pq) query = r.parsed_query;
      meta = { shape: "hookdeck", headers: r.headers, query: query === undefined ? null : query, path: r.path === undefined ? null : r.path };
      out = r.body;
    } else if (made !== undefined && typeof made === "function") {
      // Svix: webhook = {method, url, payload, eventType}; it may set cancel and headers.
      const webhook = { method: "POST", url: inp.url, payload: inp.body, eventType: inp.context.type };
      const w = made(webhook);
      if (w === null || w === false) return JSON.stringify({ skip: true }) + "\n";
      if (w === undefined || typeof w !== "object") throw new TypeError("handler(webhook) must return the webhook object (Svix's WebhookObject)");
      if (w.cancel === true) return JSON.stringify({ skip: true }) + "\n";
      meta = { shape: "svix", method: w.method === undefined ? "POST" : w.method, url: w.url === undefined ? null : w.url, headers: w.headers === undefined ? null : w.headers };
      out = w.payload;
    } else {
      throw new TypeError('the script defines no transformation: call addHandler("transform", (request, context) => request) (Hookdeck) or declare function handler(webhook) (Svix)');
    }
    meta.kind = __oncehook_kind(out);
    let text = "";
    if (meta.kind === "string") {
      text = out;
    } else if (meta.kind === "json") {
      text = JSON.stringify(out);
      if (text === undefined) throw new TypeError("the body cannot be written as JSON (a function or a symbol?)");
    }
    // The body as it came, unchanged: send the original bytes (no re-encoding of its numbers or spacing).
    meta.same = meta.kind === (inp.json ? "json" : "string") && text === bodyText;
    meta.logs = __oncehook_logs;
    return JSON.stringify(meta) + "\n" + (meta.same ? "" : text);
  } finally {
    __oncehook_restore(globalThis);
  }
}
