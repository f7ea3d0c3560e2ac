// A client process for the tests, as a user's worker would be: it reads its
// config from $ONCEHOOK_API and $ONCEHOOK_API_TOKEN, and runs effects through
// once(). Every run of an effect's function appends a line to a marks file
// (O_APPEND: lines of several processes never mix), so the test counts runs.
//
//   worker.mjs race N MARKS GO      every key race:0..N-1, in order, once GO exists
//   worker.mjs hold KEY MARKS       claims KEY, says so, then runs until killed
//   worker.mjs long KEY SECS MARKS  a function of SECS seconds under a 2 s lease
//   worker.mjs poll KEY MARKS       claims KEY without waiting until it is done
//   worker.mjs late KEY MARKS GO    claims KEY, says so, waits for the file GO

import { appendFileSync, existsSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { BusyError, Ledger, OncehookError } from "oncehook";

const mark = (path, line) => appendFileSync(path, `${line}\n`);
const ledger = new Ledger({ leaseMs: 2000, waitMs: 20_000 });
const [cmd, ...args] = process.argv.slice(2);
const print = (v) => process.stdout.write(JSON.stringify(v));

switch (cmd) {
  case "race": {
    const [n, marks, go] = [Number(args[0]), args[1], args[2]];
    mark(marks, `ready ${process.pid}`);
    while (!existsSync(go)) await sleep(5); // both processes start together
    const out = {};
    for (let i = 0; i < n; i++) {
      out[i] = await ledger.once(`race:${i}`, async () => {
        mark(marks, `race:${i} ${process.pid}`);
        await sleep(5);
        return { i, pid: process.pid };
      });
    }
    print(out);
    break;
  }
  case "hold": {
    const [key, marks] = args;
    await ledger.once(key, async (effect) => {
      mark(marks, `started ${process.pid} attempt=${effect.attempt}`);
      await sleep(120_000);
    });
    break;
  }
  case "long": {
    const [key, secs, marks] = [args[0], Number(args[1]), args[2]];
    print(await ledger.once(key, async (effect) => {
      mark(marks, `long ${process.pid} start`);
      await sleep(secs * 1000);
      mark(marks, `long ${process.pid} end lost=${effect.lost}`);
      return { pid: process.pid, attempt: effect.attempt };
    }));
    break;
  }
  case "poll": {
    const [key, marks] = args;
    let busy = 0;
    for (;;) {
      try {
        const result = await ledger.once(key, async () => {
          mark(marks, `poll ${process.pid} ran`);
          return { pid: process.pid };
        }, { waitMs: 0 });
        print({ busy, result });
        break;
      } catch (err) {
        if (!(err instanceof BusyError)) throw err;
        busy++;
        await sleep(100);
      }
    }
    break;
  }
  case "late": {
    const [key, marks, go] = args;
    try {
      await ledger.once(key, async () => {
        mark(marks, `started ${process.pid}`);
        while (!existsSync(go)) await sleep(20);
        return { late: process.pid };
      });
      print({ error: null });
    } catch (err) {
      if (!(err instanceof OncehookError)) throw err;
      print({ error: err.name, code: err.code, message: err.message });
    }
    break;
  }
  default:
    console.error(`worker.mjs: no command ${cmd}`);
    process.exit(2);
}
