package admin

import (
	"context"
	"fmt"
	"strings"
)

// ReloadView is what a config reload did.
type ReloadView struct {
	// Config is the file read.
	Config       string `json:"config"`
	Sources      int    `json:"sources"`
	Destinations int    `json:"destinations"`
	// Changed says what the reload changed, a line a source, destination
	// or API token ("destination audit removed"); empty: nothing.
	Changed []string `json:"changed"`
	// Restart names the fields that changed but wait for a restart
	// (listeners, the store): the running values stay.
	Restart []string `json:"restart,omitempty"`
}

// Reloader reads the config anew and applies what a running gateway can
// take of it (the gateway's Reload). An invalid config is refused whole,
// with every error, and the running one stays.
type Reloader func(ctx context.Context) (ReloadView, error)

// Reload reads the config anew and applies it (see Reloader), audited
// either way: "reload" with how many things changed, or "reload_refused".
// A refused config is ErrInvalid (field "config"), its errors in the
// message; a gateway without a config file to read (the demo) is
// ErrNotFound.
func (s *Service) Reload(ctx context.Context) (ReloadView, error) {
	if s.opts.Reload == nil {
		return ReloadView{}, fmt.Errorf("this gateway has no config file to reload (the demo, or a library caller that passed none): %w", ErrNotFound)
	}
	v, err := s.opts.Reload(ctx)
	if err != nil {
		msg := "refused, the running config stays: " + strings.ReplaceAll(err.Error(), "\n", "; ")
		if aErr := s.admin.RecordAudit(ctx, s.audit(ctx, "reload_refused", "config "+v.Config)); aErr != nil {
			msg += " (and its audit entry was not written: " + aErr.Error() + ")"
		}
		return v, &InvalidError{Field: "config", Msg: msg}
	}
	a := s.audit(ctx, "reload", "config "+v.Config)
	a.Count = len(v.Changed)
	if err := s.admin.RecordAudit(ctx, a); err != nil {
		// Applied already: the reload stands, and says its record failed.
		return v, fmt.Errorf("reloaded, but the audit entry was not written: %w", err)
	}
	s.opts.Changed()
	return v, nil
}
