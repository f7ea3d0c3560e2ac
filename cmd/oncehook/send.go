package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/oncehook/oncehook/provider"
)

type headerFlags []string

func (h *headerFlags) String() string     { return strings.Join(*h, ", ") }
func (h *headerFlags) Set(v string) error { *h = append(*h, v); return nil }

// send signs a payload exactly as the chosen provider does and posts it,
// optionally many times at once, to reproduce a provider's retry storm.
func send(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("send", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "", "where to send (required), e.g. http://127.0.0.1:8080/in/stripe")
	preset := fs.String("preset", "", "sign as this provider: "+strings.Join(provider.Names(), ", "))
	secret := fs.String("secret", "", "the signing secret")
	body := fs.String("body", "", "the payload")
	bodyFile := fs.String("body-file", "", "read the payload from this file (- for stdin)")
	id := fs.String("id", "", "delivery id for presets that send one (GitHub, Standard Webhooks); default: random, the same for every repeat")
	repeat := fs.Int("repeat", 1, "send the same signed request this many times")
	concurrency := fs.Int("concurrency", 1, "how many of the repeats run at once")
	sigHeader := fs.String("signature-header", "", "generic preset: signature header")
	sigEncoding := fs.String("signature-encoding", "", "generic preset: hex or base64")
	sigPrefix := fs.String("signature-prefix", "", "generic preset: prefix before the signature")
	var headers headerFlags
	fs.Var(&headers, "header", "extra header 'Name: value' (repeatable)")
	if err := flagsOnly(fs, args); err != nil {
		return err
	}
	if *url == "" || *preset == "" {
		fs.Usage()
		return errors.New("--url and --preset are required")
	}
	if *repeat < 1 || *concurrency < 1 {
		return errors.New("--repeat and --concurrency must be at least 1")
	}
	payload := []byte(*body)
	switch {
	case *bodyFile == "-":
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return err
		}
		payload = b
	case *bodyFile != "":
		b, err := os.ReadFile(*bodyFile)
		if err != nil {
			return err
		}
		payload = b
	}
	opts := provider.Options{
		Secrets:  []string{*secret},
		Generic:  provider.GenericOptions{Header: *sigHeader, Encoding: *sigEncoding, Prefix: *sigPrefix},
		Key:      []string{"header:X-Unused"}, // the generic preset requires a key rule; send does not extract keys
		Unsigned: *secret == "",
	}
	p, err := provider.New(*preset, opts)
	if err != nil {
		return err
	}
	if *id == "" {
		*id = deliveryID(*preset)
	}
	target, err := neturl.Parse(*url)
	if err != nil {
		return fmt.Errorf("--url: %w", err)
	}
	signed := &provider.Request{Method: http.MethodPost, URL: target, Header: http.Header{}, Body: payload}
	for _, kv := range headers {
		k, v, ok := strings.Cut(kv, ":")
		if !ok {
			return fmt.Errorf("--header %q: want 'Name: value'", kv)
		}
		signed.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	if *secret != "" {
		// Signed once: every repeat is the same request, as a provider's
		// retries are.
		if err := p.Sign(signed, *secret, time.Now(), *id); err != nil {
			return err
		}
	}
	h, finalURL := signed.Header, signed.URL.String()

	return sendRepeats(ctx, stdout, finalURL, h, payload, *repeat, *concurrency)
}

// sendRepeats sends the same request repeat times, concurrency at once,
// printing a line each and, for several, the count of each answer. Any
// answer but a 2xx is an error, so that a script can tell.
func sendRepeats(ctx context.Context, stdout io.Writer, url string, h http.Header, payload []byte, repeat, concurrency int) error {
	client := &http.Client{Timeout: 30 * time.Second}
	var mu sync.Mutex
	counts := map[string]int{}
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(concurrency, repeat) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range jobs {
				line, status := sendOne(ctx, client, url, h, payload)
				mu.Lock()
				counts[status]++
				fmt.Fprintf(stdout, "#%d %s\n", n, line)
				mu.Unlock()
			}
		}()
	}
	for n := 1; n <= repeat; n++ {
		jobs <- n
	}
	close(jobs)
	wg.Wait()
	if repeat > 1 {
		keys := make([]string, 0, len(counts))
		for k := range counts {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%s×%d", k, counts[k])
		}
		fmt.Fprintf(stdout, "sent %d: %s\n", repeat, strings.Join(parts, ", "))
	}
	failed := 0
	for status, n := range counts {
		if len(status) != 3 || status[0] != '2' {
			failed += n
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d requests were not answered 2xx", failed, repeat)
	}
	return nil
}

// deliveryID is a fresh delivery id the way the preset's provider makes
// one: a UUID for GitHub (X-GitHub-Delivery) and Shopify, msg_... for the
// others.
func deliveryID(preset string) string {
	var b [16]byte
	rand.Read(b[:])
	switch preset {
	case "github", "shopify":
		b[6] = b[6]&0x0f | 0x40 // version 4
		b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
		h := hex.EncodeToString(b[:])
		return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
	}
	return "msg_" + hex.EncodeToString(b[:12])
}

func sendOne(ctx context.Context, client *http.Client, url string, h http.Header, payload []byte) (line, status string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(payload))
	if err != nil {
		return "error: " + err.Error(), "error"
	}
	req.Header = h.Clone()
	resp, err := client.Do(req)
	if err != nil {
		return "error: " + err.Error(), "error"
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	return fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b))), fmt.Sprint(resp.StatusCode)
}
