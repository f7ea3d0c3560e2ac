package admin

import (
	"context"
	"fmt"
	"time"

	"github.com/oncehook/oncehook/broker"
	"github.com/oncehook/oncehook/internal/doctor"
)

// The key doctor's answers (package internal/doctor does the reading).
type (
	DoctorReport    = doctor.Report
	SourceDiagnosis = doctor.SourceDiagnosis
	Finding         = doctor.Finding
	// Samples are recent duplicates' bodies, for the doctor's second check.
	Samples = doctor.Samples
)

// Finding kinds.
const (
	FindingPerDelivery = doctor.FindingPerDelivery
	FindingTooCoarse   = doctor.FindingTooCoarse
	// FindingBrokerUnreachable: a queue source's consumer cannot reach its
	// broker now (it reconnects with backoff; HTTP intake is unaffected).
	FindingBrokerUnreachable = "broker_unreachable"
	// FindingStoreLockHeld: the gateway's writer waits now for a write
	// lock another connection holds (SQLite's one writer), and every
	// source's webhooks with it.
	FindingStoreLockHeld = "store_lock_held"
	// FindingObjectsNotApplied: another replica changed the sources or
	// destinations created through the API, and this gateway could not
	// apply what is stored (a secret sealed with a key it lacks): it
	// serves what it had.
	FindingObjectsNotApplied = "objects_not_applied"
)

// NewSamples keeps up to per duplicates per source, of bodies up to
// maxBody bytes.
func NewSamples(per, maxBody int) *Samples { return doctor.NewSamples(per, maxBody) }

// Doctor implements Operator.
func (s *Service) Doctor(ctx context.Context, source string) (DoctorReport, error) {
	var names []string
	for _, src := range s.sources() {
		if source == "" || src.Name == source {
			names = append(names, src.Name)
		}
	}
	if source != "" && len(names) == 0 {
		return DoctorReport{}, fmt.Errorf("source %q: %w", source, ErrNotFound)
	}
	report := DoctorReport{Sources: []SourceDiagnosis{}, Store: s.storeFindings()}
	if s.opts.LockWait == nil {
		report.Note = "the store's writer is the running gateway's: ask it (--api) to also check whether the writer waits for a lock another connection holds"
	}
	consumers := map[string]broker.Status{}
	if s.opts.Consumers != nil {
		for _, st := range s.opts.Consumers() {
			consumers[st.Source] = st
		}
	}
	for _, name := range names {
		d, err := doctor.Diagnose(ctx, s.admin, s.opts.Samples, name)
		if err != nil {
			return DoctorReport{}, err
		}
		if st, ok := consumers[name]; ok && !st.Connected {
			// Unreachable, or reached without what it consumes (a stream or
			// queue not there yet): the error says which.
			msg := fmt.Sprintf("the %s consumer of %s is not consuming (since %s", st.Kind, st.Where, st.Since.UTC().Format(time.RFC3339))
			if st.Error != "" {
				msg += ": " + st.Error
			}
			d.Findings = append(d.Findings, Finding{Kind: FindingBrokerUnreachable, Fields: []string{}, Keys: []string{},
				Message: msg + "); it reconnects with backoff, what it consumes waits where it is (in the broker, or the table's rows in their table), and HTTP intake is unaffected"})
		}
		report.Sources = append(report.Sources, d)
	}
	return report, nil
}

// storeFindings are the doctor's findings about the gateway's writer.
func (s *Service) storeFindings() []Finding {
	findings := []Finding{}
	if s.opts.LockWait != nil {
		if lock := s.opts.LockWait(); lock.For > 0 {
			findings = append(findings, Finding{Kind: FindingStoreLockHeld, Fields: []string{}, Keys: []string{},
				Message: lock.String() + ", and one that waits past the commit bound (30 s by default) is answered 503 (the provider retries it). " +
					"A transaction on the gateway's SQLite file holds every commit until it ends: keep it short (see the README's outbox)"})
		}
	}
	if s.opts.ObjectsBehind != nil {
		if why, since := s.opts.ObjectsBehind(); why != "" {
			findings = append(findings, Finding{Kind: FindingObjectsNotApplied, Fields: []string{}, Keys: []string{},
				Message: "the sources and destinations as stored (another replica's change through the API) cannot be applied here since " +
					since.UTC().Format(time.RFC3339) + ", so this gateway serves what it had: " + why})
		}
	}
	return findings
}
