package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/oncehook/oncehook/internal/duration"
)

// Rate is a send rate: N per second, minute or hour.
type Rate struct {
	N   int
	Per time.Duration
}

// UnmarshalYAML reads "10/s", "600/m" or "5000/h".
func (r *Rate) UnmarshalYAML(n *yaml.Node) error {
	num, unit, ok := strings.Cut(strings.TrimSpace(n.Value), "/")
	v, err := strconv.Atoi(strings.TrimSpace(num))
	if !ok || err != nil || v < 1 {
		return fmt.Errorf("%q: want a count per unit, e.g. 10/s, 600/m or 5000/h", n.Value)
	}
	switch strings.TrimSpace(unit) {
	case "s":
		r.Per = time.Second
	case "m":
		r.Per = time.Minute
	case "h":
		r.Per = time.Hour
	default:
		return fmt.Errorf("%q: the unit is s, m or h", n.Value)
	}
	r.N = v
	return nil
}

// Duration is a time.Duration that also reads days ("7d", "1d12h"). A
// duration written in the config must be positive and at most MaxDuration:
// a zero would silently mean "the default", and a huge number of days
// would overflow into something short.
type Duration time.Duration

// MaxDuration is the longest duration a config accepts (ten years).
const MaxDuration = duration.Max

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseDuration(n.Value)
	if err != nil {
		return err
	}
	if v <= 0 {
		return fmt.Errorf("duration %q must be positive (leave the field out for its default)", n.Value)
	}
	*d = Duration(v)
	return nil
}

// ParseDuration is time.ParseDuration with a leading whole number of days,
// refusing anything longer than MaxDuration (before it can overflow).
func ParseDuration(s string) (time.Duration, error) { return duration.Parse(s) }

// ByteSize is a size in bytes that also reads KiB, MiB and GiB ("5MiB").
type ByteSize int64

// UnmarshalYAML implements yaml.Unmarshaler.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	s := strings.TrimSpace(n.Value)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(v), u.m
			break
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 || v > (1<<40)/mult {
		return fmt.Errorf("size %q: want e.g. 5MiB, 512KiB or 1048576", n.Value)
	}
	*b = ByteSize(v * mult)
	return nil
}
