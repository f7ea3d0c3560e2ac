package admin

import (
	"context"
	"fmt"

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
	report := DoctorReport{Sources: []SourceDiagnosis{}}
	for _, name := range names {
		d, err := doctor.Diagnose(ctx, s.admin, s.opts.Samples, name)
		if err != nil {
			return DoctorReport{}, err
		}
		report.Sources = append(report.Sources, d)
	}
	return report, nil
}
