package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// manyObjects is the config text of n sources after bench (each a line
// of the sources list) and of their n destinations (lines of the
// destinations list), one in every transformEvery transforming, each
// with its own script.
func manyObjects(n, transformEvery int) (sources, destinations string) {
	var s, d strings.Builder
	for i := range n {
		fmt.Fprintf(&s, "  - {name: s%05d, preset: stripe, secrets: [%q], destinations: [d%05d]}\n", i, secret, i)
		fmt.Fprintf(&d, "  - {name: d%05d, url: \"http://127.0.0.1:9/d%05d\"", i, i)
		if transformEvery > 0 && i%transformEvery == 0 {
			fmt.Fprintf(&d, ", transform: {inline: %q}", strings.Replace(benchTransform, "Purchase", "Purchase"+strconv.Itoa(i), 1))
		}
		d.WriteString("}\n")
	}
	return s.String(), d.String()
}

// manyObjectsScenario is the headline (unique events into bench, one
// destination, the sink) on a gateway with one other source and
// destination and on one with b.many others (a tenth transforming), in turn,
// three times (every other round the large one first), each on a fresh
// SQLite file: intake to one source must not care how many others there
// are. Each gateway's memory is read after a GC once it is ready, and one
// change through the API (a destination created, then deleted: each
// rebuilds the whole config) is timed 5 times.
func (b *bench) manyObjectsScenario() ([]result, error) {
	const rounds = 3
	var rows []result
	var rates, cpu [2][]float64 // requests a second; CPU (user and system, the whole process's) a request
	var heap, rss [2]float64
	var create, remove [2][]time.Duration
	var ready [2]time.Duration
	for round := range rounds {
		// The baseline has one other source and destination: a destination
		// alone has the worker's whole pool, one among others three
		// quarters of it (sharedConcurrency), and that is not what is
		// measured here.
		order := []int{1, b.many}
		if round%2 == 1 {
			order = []int{b.many, 1} // the machine's drift falls on both alike
		}
		for _, many := range order {
			i := 0
			if many == b.many {
				i = 1
			}
			o := gwOptions{many: many, transformEvery: 10}
			k, err := newSink()
			if err != nil {
				return nil, err
			}
			runtime.GC()
			debug.FreeOSMemory()
			heap0, rss0 := memNow()
			gw, err := startGateway("sqlite://"+filepath.Join(b.dir, fmt.Sprintf("many-%d-%d.db", many, round)), "", k.url, o)
			if err != nil {
				k.stop()
				return nil, err
			}
			runtime.GC()
			debug.FreeOSMemory()
			h, r := memNow()
			heap[i], rss[i] = heap[i]+(h-heap0)/rounds, rss[i]+(r-rss0)/rounds
			ready[i] += gw.ready / rounds
			for j := range 5 {
				name := fmt.Sprintf("api-%d", j)
				took, err := timeAPI(http.MethodPost, gw.apiURL+"/v1/destinations", `{"name": "`+name+`", "url": "http://127.0.0.1:9/api"}`, http.StatusCreated)
				if err != nil {
					gw.stop()
					k.stop()
					return nil, err
				}
				create[i] = append(create[i], took)
				if took, err = timeAPI(http.MethodDelete, gw.apiURL+"/v1/destinations/"+name, "", http.StatusOK, http.StatusNoContent); err != nil {
					gw.stop()
					k.stop()
					return nil, err
				}
				remove[i] = append(remove[i], took)
			}
			what := "bench and one other source and destination"
			if many > 1 {
				what = fmt.Sprintf("bench among %d sources and %d destinations, %d transforming", many+1, many+1, (many+9)/10)
			}
			runtime.GC() // the changes' garbage is not the load's
			cpu0 := processCPU()
			res := load(fmt.Sprintf("oncehook: the headline, %s (round %d)", what, round+1), b.conns, b.duration, b.unique(gw.url+"/in/bench"))
			perReq := (processCPU() - cpu0).Seconds() / float64(res.requests+b.conns)
			res.note = fmt.Sprintf("ready in %s; %.0f µs of CPU a request (this process: the gateway, the sink and the load)", gw.ready.Round(time.Millisecond), perReq*1e6)
			rates[i] = append(rates[i], res.rate())
			cpu[i] = append(cpu[i], perReq)
			rows = append(rows, res)
			gw.stop()
			k.stop()
		}
	}
	objects := float64(2 * (b.many - 1))
	med := func(ds []time.Duration) time.Duration {
		slices.Sort(ds)
		return ds[len(ds)/2].Round(100 * time.Microsecond)
	}
	note := fmt.Sprintf("manyobjects: intake to one source among %d sources and %d destinations (%d transforming), against it beside one other: "+
		"%s; over the %d rounds %.1f%%; CPU a request %s, over the %d rounds %.1f%%\n"+
		"  ready after start: with one other %s, with the others %s\n"+
		"  memory once ready (after a GC): Go heap with one other %.1f MiB, with the others %.1f MiB: %.2f KiB an object (%d objects); "+
		"resident %.1f MiB and %.1f MiB: %.2f KiB an object\n"+
		"  one change through the API (p50 of 5; each rebuilds the whole config): create a destination with one other %s, with the others %s; "+
		"delete it with one other %s, with the others %s",
		b.many+1, b.many+1, (b.many+9)/10,
		perRound(rates), rounds, 100*sum(rates[1])/sum(rates[0]), perRound(cpu), rounds, 100*sum(cpu[1])/sum(cpu[0]),
		ready[0].Round(time.Millisecond), ready[1].Round(time.Millisecond),
		heap[0]/(1<<20), heap[1]/(1<<20), (heap[1]-heap[0])/objects/1024, int(objects),
		rss[0]/(1<<20), rss[1]/(1<<20), (rss[1]-rss[0])/objects/1024,
		med(create[0]), med(create[1]), med(remove[0]), med(remove[1]))
	fmt.Fprintln(os.Stderr, note)
	b.notes = append(b.notes, note)
	return rows, nil
}

// perRound is each round's ratio of rates[1] to rates[0].
func perRound(rates [2][]float64) string {
	var parts []string
	for i := range rates[0] {
		parts = append(parts, fmt.Sprintf("round %d %.1f%%", i+1, 100*rates[1][i]/rates[0][i]))
	}
	return strings.Join(parts, ", ")
}

func sum(xs []float64) (t float64) {
	for _, x := range xs {
		t += x
	}
	return t
}

// processCPU is the CPU this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// memNow is the Go heap in use and the process's resident memory, in
// bytes (resident 0 where /proc is not).
func memNow() (heap, resident float64) {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	heap = float64(m.HeapInuse)
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kib, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
				resident = kib * 1024
			}
		}
	}
	return heap, resident
}

// timeAPI makes one call to the gateway's API and says how long it took
// to answer one of want.
func timeAPI(method, url, body string, want ...int) (time.Duration, error) {
	req, err := http.NewRequest(method, url, bytes.NewReader([]byte(body)))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+apiToken)
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	if !slices.Contains(want, resp.StatusCode) {
		return 0, fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, got)
	}
	return took, nil
}

// manyReplicasScenario times a change made through one replica's API
// until another replica serves it, on PostgreSQL (its NOTIFY tells the
// other), with two gateways on one fresh schema: each with one other
// source and destination beside bench, then each with b.many others (a
// tenth transforming). A destination is created through A, timed until
// B answers GET /v1/destinations/{name} 200 (B runs it), then deleted,
// timed until B answers 404; 5 times each.
func (b *bench) manyReplicasScenario() ([]result, error) {
	var lines []string
	for _, many := range []int{1, b.many} {
		pgURL, drop, err := freshSchema(pgBase)
		if err != nil {
			return nil, fmt.Errorf("the pgmanyobjects scenario needs %s: %w", pgBase, err)
		}
		k, err := newSink()
		if err != nil {
			drop()
			return nil, err
		}
		o := gwOptions{many: many, transformEvery: 10}
		a, err := startGateway(pgURL, "", k.url, o)
		if err != nil {
			k.stop()
			drop()
			return nil, err
		}
		c, err := startGateway(pgURL, "", k.url, o)
		if err != nil {
			a.stop()
			k.stop()
			drop()
			return nil, err
		}
		var create, remove, ownCreate []time.Duration
		for j := range 5 {
			name := fmt.Sprintf("replicated-%d", j)
			start := time.Now()
			took, err := timeAPI(http.MethodPost, a.apiURL+"/v1/destinations", `{"name": "`+name+`", "url": "http://127.0.0.1:9/api"}`, http.StatusCreated)
			if err == nil {
				ownCreate = append(ownCreate, took)
				err = waitStatus(c.apiURL+"/v1/destinations/"+name, http.StatusOK)
				create = append(create, time.Since(start))
			}
			if err == nil {
				start = time.Now()
				if _, err = timeAPI(http.MethodDelete, a.apiURL+"/v1/destinations/"+name, "", http.StatusOK, http.StatusNoContent); err == nil {
					err = waitStatus(c.apiURL+"/v1/destinations/"+name, http.StatusNotFound)
					remove = append(remove, time.Since(start))
				}
			}
			if err != nil {
				a.stop()
				c.stop()
				k.stop()
				drop()
				return nil, err
			}
		}
		a.stop()
		c.stop()
		k.stop()
		drop()
		lines = append(lines, fmt.Sprintf("  %d sources and %d destinations (%d transforming): created through A, answered by A p50 %s; served by B p50 %s, max %s; deleted, 404 at B p50 %s, max %s",
			many+1, many+1, (many+9)/10, p50(ownCreate), p50(create), slices.Max(create).Round(100*time.Microsecond), p50(remove), slices.Max(remove).Round(100*time.Microsecond)))
	}
	note := "pgmanyobjects: a change through replica A's API until replica B (same PostgreSQL) serves it, 5 times each\n" + strings.Join(lines, "\n")
	fmt.Fprintln(os.Stderr, note)
	b.notes = append(b.notes, note)
	return nil, nil
}

func p50(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2].Round(100 * time.Microsecond)
}

// waitStatus asks url (the API, with the bench's token) every 2 ms until
// it answers want, for up to a minute.
func waitStatus(url string, want int) error {
	deadline := time.Now().Add(time.Minute)
	for {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+apiToken)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == want {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("GET %s: not %d within a minute", url, want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
