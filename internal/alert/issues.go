package alert

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/internal/alert/channel"
	"github.com/oncehook/oncehook/store"
)

// An alert's life is an issue in the store (store.AlertIssues), so that
// what was told survives a restart and is shared by every replica
// (invariant 27: once when the condition starts, once when it ends):
//
//   - a condition that holds opens an issue, unless one is active (open
//     or acknowledged) for its kind, scope and name: the store's unique
//     index arbitrates, so replicas open one;
//   - an open issue not yet notified is notified "opened"; one notified
//     longer than RemindAfter ago, still open, "reminder";
//   - an acknowledged issue is notified nothing more until it resolves;
//   - an active issue whose condition no longer holds resolves by itself;
//   - a resolved issue whose opening was notified and whose resolution
//     was not is notified "resolved", whoever resolved it (its By names
//     an operator); one never notified opened is not notified resolved,
//     since nobody heard of it.
//
// Each notice is sent to each channel as an effect of the ledger under
// oncehook:alert:issue:<id>:<event>[:<n>]:<channel>, so a channel that
// told it (on any replica, before any restart) is not told again, and a
// sender killed halfway is taken over when its lease expires; once every
// channel told it, the issue is marked notified by a compare and set on
// its count of notices (one replica marks it, and counts it in
// oncehook_alerts_total). A channel that fails is tried again at the next
// check; the issue is marked only once every channel told it.

// activeLimit bounds the active issues one check reads (kinds ×
// sources and destinations: far fewer).
const activeLimit = 10000

// track opens, resolves and notifies the issues of the conditions that
// hold now (alerts).
func (a *Alerter) track(ctx context.Context, now time.Time, alerts []Alert) error {
	active, err := a.opts.Store.Issues(ctx, store.IssueQuery{States: []string{store.IssueOpen, store.IssueAcknowledged}, Limit: activeLimit})
	if err != nil {
		return fmt.Errorf("alert issues: %w", err)
	}
	ended := map[alertID]store.AlertIssue{}
	for _, is := range active {
		ended[alertID{is.Kind, is.Scope, is.Name}] = is
	}
	var errs []error
	var current []store.AlertIssue
	for _, al := range alerts {
		id := alertID{al.Kind, al.Scope, al.Name}
		delete(ended, id)
		is, opened, err := a.opts.Store.OpenIssue(ctx, store.NewIssue{Kind: al.Kind, Scope: al.Scope, Name: al.Name, At: now,
			Figures: store.IssueFigures{Message: al.Message, Value: al.Value, Threshold: al.Threshold, Baseline: al.Baseline, Volume: al.Volume}})
		if err != nil {
			errs = append(errs, fmt.Errorf("open issue %s %s: %w", al.Kind, al.Name, err))
			continue
		}
		if is.ID == 0 {
			continue // another replica's later check saw it end
		}
		if opened {
			a.opts.Logger.Info("alert issue opened", "issue", is.ID, "kind", al.Kind, al.Scope, al.Name)
		}
		current = append(current, is)
	}
	for _, is := range ended {
		if _, changed, err := a.opts.Store.ResolveIssue(ctx, is.ID, now, "", store.AuditEntry{}); err != nil {
			errs = append(errs, fmt.Errorf("resolve issue %d: %w", is.ID, err))
		} else if changed {
			a.opts.Logger.Info("alert issue resolved: its condition ended", "issue", is.ID, "kind", is.Kind, is.Scope, is.Name)
		}
	}
	resolved, err := a.opts.Store.Issues(ctx, store.IssueQuery{Unnotified: true, Limit: 100})
	if err != nil {
		errs = append(errs, fmt.Errorf("alert issues: %w", err))
	}
	for _, is := range resolved {
		errs = append(errs, a.notice(ctx, is, store.NoticeResolved, now))
	}
	for _, is := range current {
		switch {
		case is.State != store.IssueOpen:
		case is.Notices == 0:
			errs = append(errs, a.notice(ctx, is, store.NoticeOpened, now))
		case a.opts.RemindAfter > 0 && !now.Before(is.LastNotifiedAt.Add(a.opts.RemindAfter)):
			errs = append(errs, a.notice(ctx, is, store.NoticeReminder, now))
		}
	}
	return errors.Join(errs...)
}

// notice tells event of issue is to every channel, each once, and marks
// it told once every channel has.
func (a *Alerter) notice(ctx context.Context, is store.AlertIssue, event string, now time.Time) error {
	seq := is.Notices + 1
	key := fmt.Sprintf("oncehook:alert:issue:%d:%s", is.ID, event)
	if event == store.NoticeReminder {
		key += ":" + strconv.Itoa(seq)
	}
	n := channel.Notice{Event: event, IssueID: strconv.FormatInt(is.ID, 10), Kind: is.Kind, Scope: is.Scope, Name: is.Name,
		Message: is.Figures.Message, Value: is.Figures.Value, Threshold: is.Figures.Threshold, Baseline: is.Figures.Baseline,
		Volume: is.Figures.Volume, Opened: is.OpenedAt, At: now, Key: key}
	if event == store.NoticeResolved {
		n.At, n.By = is.ResolvedAt, is.ResolvedBy
		n.Message = resolvedMessage(is)
	}
	if a.opts.TenantOf != nil {
		n.Tenant = a.opts.TenantOf(is.Scope, is.Name)
	}
	var errs []error
	busy := false
	for _, ch := range a.opts.Channels {
		if t := a.opts.ChannelTenants[ch.Name()]; t != "" && t != n.Tenant {
			continue // another tenant's issue, or one of no tenant: not this customer's to see
		}
		err := a.tell(ctx, ch, key+":"+ch.Name(), n)
		if errors.Is(err, errBusy) {
			busy = true
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("alert issue %d %s to channel %s: %w", is.ID, event, ch.Name(), err))
		}
	}
	if len(errs) > 0 || busy {
		return errors.Join(errs...) // the next check tries the channels that failed, or finds them told
	}
	marked, err := a.opts.Store.MarkIssueNotified(ctx, is.ID, event, seq, now)
	if err != nil {
		return fmt.Errorf("alert issue %d %s: %w", is.ID, event, err)
	}
	if marked {
		a.total.WithLabelValues(is.Kind, event).Inc()
		if event == store.NoticeResolved {
			a.opts.Logger.Info("alert resolved: "+n.Message, "issue", is.ID, "kind", is.Kind, is.Scope, is.Name, "by", is.ResolvedBy)
		} else {
			a.opts.Logger.Warn("alert: "+n.Message, "issue", is.ID, "event", event, "kind", is.Kind, is.Scope, is.Name,
				"value", is.Figures.Value, "threshold", is.Figures.Threshold)
		}
	}
	return nil
}

// tell sends n to ch once, as the effect key: a channel that told it
// before (on any replica, before a restart) is not told again.
func (a *Alerter) tell(ctx context.Context, ch channel.Channel, key string, n channel.Notice) error {
	send := func(ctx context.Context, _ effect.Claim) (json.RawMessage, error) {
		if err := ch.Send(ctx, n); err != nil {
			return nil, err
		}
		return json.RawMessage(`{"sent":true}`), nil
	}
	if a.opts.Ledger == nil {
		_, err := send(ctx, effect.Claim{})
		return err
	}
	_, _, err := effect.Do(ctx, a.opts.Ledger, key, effect.ClaimOptions{Lease: 30 * time.Second}, send)
	var busy *effect.BusyError
	if errors.As(err, &busy) {
		return errBusy // another replica is sending it: not marked here, the next check finds it done
	}
	return err
}

// errBusy is a notice another replica is sending to a channel now.
var errBusy = errors.New("another replica is sending it")

// resolvedMessage says how issue is ended.
func resolvedMessage(is store.AlertIssue) string {
	if is.ResolvedBy != "" {
		return fmt.Sprintf("%s %s: %s issue resolved by %s", is.Scope, is.Name, is.Kind, is.ResolvedBy)
	}
	return fmt.Sprintf("%s %s: %s issue resolved: its condition ended", is.Scope, is.Name, is.Kind)
}
