package admin

import (
	"context"
	"fmt"
	"strings"

	"github.com/oncehook/oncehook/store"
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

// Reloader reads the config anew and checks it against the running one
// (the gateway's): an invalid config is refused whole, with every error, and
// the running one stays. A valid one is not applied yet: finish(true)
// applies it, finish(false) lets it go; one of them must be called, and no
// other reload runs until it is.
type Reloader func(ctx context.Context) (v ReloadView, finish func(apply bool), err error)

// Reload reads the config anew and applies it (see Reloader), audited
// either way: "reload" with how many things changed, or "reload_refused".
// The entry is written before the change is made: a reload whose entry
// cannot be written is not applied (ErrUnavailable's kin, a 503), so no
// change goes unrecorded. A refused config is ErrInvalid (field "config"),
// its errors in the message; a gateway without a config file to read (the
// demo) is ErrNotFound.
func (s *Service) Reload(ctx context.Context) (ReloadView, error) {
	if s.opts.Reload == nil {
		return ReloadView{}, fmt.Errorf("this gateway has no config file to reload (the demo, or a library caller that passed none): %w", ErrNotFound)
	}
	v, finish, err := s.opts.Reload(ctx)
	if err != nil {
		msg := "refused, the running config stays: " + strings.ReplaceAll(err.Error(), "\n", "; ")
		if aErr := s.admin.RecordAudit(ctx, s.auditAs(ctx, "reload_refused", "config "+v.Config)); aErr != nil {
			msg += " (and its audit entry was not written: " + aErr.Error() + ")"
		}
		return v, &InvalidError{Field: "config", Msg: msg}
	}
	a := s.audit(ctx, ActReload, "config "+v.Config)
	a.Count = len(v.Changed)
	if err := s.admin.RecordAudit(ctx, a); err != nil {
		// Whatever the store said, the answer is the same: nothing
		// changed, and the same reload can be tried again.
		finish(false)
		return v, fmt.Errorf("not reloaded, the running config stays: its audit entry could not be written: %w: %w", store.ErrUnavailable, err)
	}
	finish(true)
	s.opts.Changed()
	return v, nil
}
