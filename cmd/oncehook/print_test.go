package main

import (
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/admin"
)

// Found from outside: after a replay, "events show" printed "delivered
// after 1 attempt" above three attempts all numbered #1, with nothing to
// say where each replay began, and a retry's line said "HTTP 503 HTTP 503"
// (the status, then an error that only repeats it).
func TestADeliveryPrintsWhereEachReplayBegan(t *testing.T) {
	at := time.Date(2026, 12, 2, 15, 9, 0, 0, time.UTC)
	d := admin.DeliveryDetail{Destination: "app", State: "delivered", Attempts: 1, History: []admin.AttemptDetail{
		{Attempt: 1, StartedAt: at, DurationMS: 1, Status: 503, Error: "HTTP 503", Outcome: "retry", Response: `{"err":"busy"}`},
		{Attempt: 2, StartedAt: at.Add(2 * time.Second), DurationMS: 12, Status: 200, Outcome: "delivered"},
		{Attempt: 1, StartedAt: at.Add(time.Hour), DurationMS: 3, Status: 422, Error: "permanent failure: HTTP 422", Outcome: "dead"},
		{Attempt: 1, StartedAt: at.Add(2 * time.Hour), DurationMS: 2, Status: 200, Outcome: "delivered"},
	}}
	var out strings.Builder
	printDelivery(&out, d)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{
		"delivery to app: delivered after 1 attempt since its last replay, 4 in all",
		"#1", "#2", "replayed:", "#1", "replayed:", "#1",
	}
	if len(lines) != len(want) {
		t.Fatalf("printed %d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d %q: want %q in it", i+1, lines[i], w)
		}
	}
	if !strings.Contains(lines[1], `retry HTTP 503 | {"err":"busy"}`) || strings.Contains(out.String(), "HTTP 503 HTTP 503") {
		t.Errorf("a retry's line repeats its status, or lost its answer: %q", lines[1])
	}
	if !strings.Contains(lines[2], "#2 2026-12-02 15:09:02.000   12ms delivered HTTP 200") {
		t.Errorf("an attempt's time and duration: %q, want them to the millisecond, as kept", lines[2])
	}
	if !strings.Contains(lines[4], "dead HTTP 422 permanent failure: HTTP 422") {
		t.Errorf("a dead letter's error is its own, and stays: %q", lines[4])
	}
	// Without a replay, the line is as it was.
	out.Reset()
	printDelivery(&out, admin.DeliveryDetail{Destination: "app", State: "delivered", Attempts: 1, History: d.History[3:]})
	if first, _, _ := strings.Cut(out.String(), "\n"); first != "delivery to app: delivered after 1 attempt" || strings.Contains(out.String(), "replayed") {
		t.Errorf("a delivery never replayed:\n%s", out.String())
	}
}

// Found from outside: GitHub events with one body under distinct delivery
// ids (the key a header holds) made doctor print a bare "fields:" line:
// identical bodies differ in no field, and the line said nothing.
func TestDoctorPrintsOnlyTheFieldsItFound(t *testing.T) {
	rep := admin.DoctorReport{Sources: []admin.SourceDiagnosis{{Source: "gh", SampledEvents: 7, Findings: []admin.Finding{
		{Kind: admin.FindingPerDelivery, Message: "6 of 7 recent events share identical bodies", Fields: []string{}, Keys: []string{"d1", "d2"}},
		{Kind: admin.FindingTooCoarse, Message: "duplicates differ in business fields", Fields: []string{"status"}, Keys: []string{"k1"}},
	}}}}
	var out strings.Builder
	printDoctor(&out, rep)
	got := out.String()
	if strings.Contains(got, "fields: \n") || strings.Count(got, "fields:") != 1 || !strings.Contains(got, "    fields: status\n") {
		t.Errorf("doctor printed an empty fields line, or lost one:\n%s", got)
	}
	if !strings.Contains(got, "    keys: d1, d2\n") || !strings.Contains(got, "    keys: k1\n") {
		t.Errorf("doctor lost a finding's keys:\n%s", got)
	}
}

// Issue 41: a running gateway's doctor names its writer's wait for a
// write lock another connection holds, before the sources; on the store
// directly it says it cannot see the gateway's writer.
func TestDoctorPrintsTheStoresFindingsFirst(t *testing.T) {
	rep := admin.DoctorReport{
		Store:   []admin.Finding{{Kind: admin.FindingStoreLockHeld, Message: "the store's writer has waited 12.3s for the database's write lock, which another connection holds"}},
		Sources: []admin.SourceDiagnosis{{Source: "stripe", SampledEvents: 3, Findings: []admin.Finding{}}},
	}
	var out strings.Builder
	printDoctor(&out, rep)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || lines[0] != "store: store_lock_held: the store's writer has waited 12.3s for the database's write lock, which another connection holds" ||
		!strings.HasPrefix(lines[1], "stripe: ") {
		t.Errorf("doctor with a store finding:\n%s", out.String())
	}
	out.Reset()
	printDoctor(&out, admin.DoctorReport{Note: "ask the gateway", Store: []admin.Finding{}, Sources: rep.Sources})
	if !strings.HasPrefix(out.String(), "note: ask the gateway\n") {
		t.Errorf("doctor's note:\n%s", out.String())
	}
}
