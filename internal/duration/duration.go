// Package duration reads the durations a person writes to oncehook: in the
// config, in a CLI flag, in an API body. One parser, so that "7d" means
// the same everywhere (Go's time.ParseDuration has no days).
package duration

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Max is the longest duration accepted (ten years): a huge number of days
// must be refused before it can overflow into something short.
const Max = 3650 * 24 * time.Hour

// Parse is time.ParseDuration with a leading whole number of days ("7d",
// "1d12h"), refusing anything longer than Max.
func Parse(s string) (time.Duration, error) {
	bad := fmt.Errorf("duration %q: want e.g. 90s, 72h or 7d", s)
	tooLong := fmt.Errorf("duration %q is longer than %dd", s, Max/(24*time.Hour))
	var d time.Duration
	rest := s
	if days, after, ok := strings.Cut(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 {
			return 0, bad
		}
		if int64(n) > int64(Max/(24*time.Hour)) {
			return 0, tooLong
		}
		d, rest = time.Duration(n)*24*time.Hour, after
		if rest == "" {
			return d, nil
		}
	}
	r, err := time.ParseDuration(rest)
	if err != nil {
		return 0, bad
	}
	if r > Max || d+r > Max {
		return 0, tooLong
	}
	return d + r, nil
}

// Seconds turns a number of seconds into a duration, refusing one longer
// than Max instead of overflowing (1e300 seconds is not "more than 0").
func Seconds(secs float64) (time.Duration, error) {
	if secs > Max.Seconds() || secs < -Max.Seconds() {
		return 0, fmt.Errorf("%g seconds is longer than %dd", secs, Max/(24*time.Hour))
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// Flag is a flag.Value of a duration in the same words.
type Flag struct{ D *time.Duration }

func (f Flag) String() string {
	if f.D == nil {
		return ""
	}
	return f.D.String()
}

func (f Flag) Set(s string) error {
	v, err := Parse(s)
	if err != nil {
		return err
	}
	*f.D = v
	return nil
}
