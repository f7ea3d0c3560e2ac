package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/oncehook/oncehook/internal/transform"
)

// Script is the destination's compiled transformation, nil when it has
// none. Load, Parse and Validate compile every script once.
func (c *Config) Script(destination string) *transform.Script {
	return c.scripts[destination]
}

// CloseScripts releases the compiled scripts' idle runtimes (a reload calls
// it on the config it replaced; runs in flight finish on theirs).
func (c *Config) CloseScripts() {
	for _, s := range c.scripts {
		s.Close()
	}
}

// compileTransform reads and compiles a destination's script.
func (c *Config) compileTransform(d Destination) (*transform.Script, error) {
	t := d.Transform
	if (t.File == "") == (t.Inline == "") {
		return nil, errors.New("want a script's file (transform: path.js) or its text (transform: {inline: ...}), one of them")
	}
	src := t.Inline
	if t.File != "" {
		p := t.File
		if !filepath.IsAbs(p) && c.dir != "" {
			p = filepath.Join(c.dir, p)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read the script: %w", err)
		}
		src = string(b)
	}
	if t.Timeout < 0 || t.MaxMemory < 0 || t.MaxOutput < 0 {
		return nil, errors.New("timeout, max_memory and max_output cannot be negative")
	}
	if t.MaxMemory > 0 && t.MaxMemory < 1<<20 {
		return nil, fmt.Errorf("max_memory %d bytes: at least 1MiB (the sandbox itself needs some)", t.MaxMemory)
	}
	return transform.Compile(t.Name(d.Name), src, transform.Options{
		Timeout: time.Duration(t.Timeout), MaxMemory: int64(t.MaxMemory), MaxOutput: int64(t.MaxOutput),
	})
}
