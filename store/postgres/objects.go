package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncehook/oncehook/store"
)

const objectColumns = `kind, name, tenant, version, spec, created_at, updated_at, created_by, updated_by`

func (s *Store) scanObject(r pgx.Row) (store.Object, error) {
	var o store.Object
	var spec string
	if err := r.Scan(&o.Kind, &o.Name, &o.Tenant, &o.Version, &spec, &o.CreatedAt, &o.UpdatedAt, &o.CreatedBy, &o.UpdatedBy); err != nil {
		return o, err
	}
	o.Spec, o.CreatedAt, o.UpdatedAt = []byte(spec), s.fromDB(o.CreatedAt), s.fromDB(o.UpdatedAt)
	return o, nil
}

// objectChange runs fn in a transaction with the audit entry a, and
// returns the object fn wrote. Times are the database's clock's, as
// sessions' and leases' are.
func (s *Store) objectChange(ctx context.Context, op string, a store.AuditEntry, fn func(tx pgx.Tx, now time.Time) (store.Object, error)) (store.Object, error) {
	var o store.Object
	var named error // fn's own answer (a name taken, a version moved on)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		now := s.toDB(s.clock())
		var err error
		if o, err = fn(tx, now); err != nil {
			named = err
			return err
		}
		// Every replica's ListenObjects hears of the change when this
		// transaction commits (and not if it rolls back): NOTIFY is
		// queued here, in the change's own transaction, on purpose.
		if _, err := tx.Exec(ctx, "SELECT pg_notify($1, current_schema())", objectsChannel); err != nil {
			return err
		}
		if a.Action == "" {
			return nil
		}
		at := a.At
		if at.IsZero() {
			at = s.clock()
		}
		_, err = tx.Exec(ctx, `INSERT INTO audit (at, actor, action, target, count) VALUES ($1, $2, $3, $4, 1)`,
			s.toDB(at), a.Actor, a.Action, a.Target)
		return err
	})
	switch {
	case named != nil && (errors.Is(named, store.ErrObjectExists) || errors.Is(named, store.ErrVersionConflict) || errors.Is(named, store.ErrNotFound)):
		return store.Object{}, named
	case err != nil:
		return store.Object{}, failed(op, err)
	}
	return o, nil
}

// CreateObject implements store.Objects: the primary key decides a name
// taken (ON CONFLICT DO NOTHING), never a read before.
func (s *Store) CreateObject(ctx context.Context, o store.Object, audit store.AuditEntry) (store.Object, error) {
	return s.objectChange(ctx, "create object", audit, func(tx pgx.Tx, now time.Time) (store.Object, error) {
		got, err := s.scanObject(tx.QueryRow(ctx, `INSERT INTO objects (`+objectColumns+`) VALUES ($1, $2, $3, 1, $4, $5, $5, $6, $6)
			ON CONFLICT (kind, name) DO NOTHING RETURNING `+objectColumns,
			o.Kind, o.Name, o.Tenant, string(o.Spec), now, audit.Actor))
		if errors.Is(err, pgx.ErrNoRows) {
			return got, fmt.Errorf("%s %s: %w", o.Kind, o.Name, store.ErrObjectExists)
		}
		return got, err
	})
}

// Object implements store.Objects.
func (s *Store) Object(ctx context.Context, kind, name string) (store.Object, error) {
	o, err := s.scanObject(s.pool.QueryRow(ctx, `SELECT `+objectColumns+` FROM objects WHERE kind = $1 AND name = $2`, kind, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return o, fmt.Errorf("%s %s: %w", kind, name, store.ErrNotFound)
	}
	if err != nil {
		return o, unavailable("read object", err)
	}
	return o, nil
}

// ListObjects implements store.Objects.
func (s *Store) ListObjects(ctx context.Context, kind string) ([]store.Object, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+objectColumns+` FROM objects WHERE $1 = '' OR kind = $1 ORDER BY kind, name`, kind)
	if err != nil {
		return nil, unavailable("list objects", err)
	}
	defer rows.Close()
	var out []store.Object
	for rows.Next() {
		o, err := s.scanObject(rows)
		if err != nil {
			return nil, unavailable("list objects", err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable("list objects", err)
	}
	return out, nil
}

// UpdateObject implements store.Objects: the version in the WHERE is the
// optimistic check, decided by the write itself (the row's lock orders
// two updates; the second sees the first's version).
func (s *Store) UpdateObject(ctx context.Context, o store.Object, version int64, audit store.AuditEntry) (store.Object, error) {
	return s.objectChange(ctx, "update object", audit, func(tx pgx.Tx, now time.Time) (store.Object, error) {
		got, err := s.scanObject(tx.QueryRow(ctx, `UPDATE objects SET spec = $1, tenant = $2, version = version + 1, updated_at = $3, updated_by = $4
			WHERE kind = $5 AND name = $6 AND version = $7 RETURNING `+objectColumns,
			string(o.Spec), o.Tenant, now, audit.Actor, o.Kind, o.Name, version))
		if errors.Is(err, pgx.ErrNoRows) {
			return got, missedObject(ctx, tx, o.Kind, o.Name, version)
		}
		return got, err
	})
}

// DeleteObject implements store.Objects.
func (s *Store) DeleteObject(ctx context.Context, kind, name string, version int64, audit store.AuditEntry) error {
	_, err := s.objectChange(ctx, "delete object", audit, func(tx pgx.Tx, _ time.Time) (store.Object, error) {
		tag, err := tx.Exec(ctx, `DELETE FROM objects WHERE kind = $1 AND name = $2 AND ($3 = 0 OR version = $3)`, kind, name, version)
		if err != nil {
			return store.Object{}, err
		}
		if tag.RowsAffected() == 0 {
			return store.Object{}, missedObject(ctx, tx, kind, name, version)
		}
		return store.Object{}, nil
	})
	return err
}

// missedObject says why a change of kind and name at version wrote
// nothing: the object is gone, or its version moved on.
func missedObject(ctx context.Context, tx pgx.Tx, kind, name string, version int64) error {
	var now int64
	err := tx.QueryRow(ctx, `SELECT version FROM objects WHERE kind = $1 AND name = $2`, kind, name).Scan(&now)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%s %s: %w", kind, name, store.ErrNotFound)
	case err != nil:
		return err
	}
	return fmt.Errorf("%s %s is at version %d, not %d: %w", kind, name, now, version, store.ErrVersionConflict)
}

// objectsChannel is the LISTEN/NOTIFY channel that announces a change to
// the objects; its payload names the schema, as notifyChannel's does.
const objectsChannel = "oncehook_objects"

// ObjectsMark implements store.Objects: the objects' kinds, names,
// versions and update times, no spec.
func (s *Store) ObjectsMark(ctx context.Context) (string, error) {
	rows, err := s.pool.Query(ctx, `SELECT kind, name, version, updated_at FROM objects ORDER BY kind, name`)
	if err != nil {
		return "", unavailable("read the objects' mark", err)
	}
	defer rows.Close()
	var list []store.Object
	for rows.Next() {
		var o store.Object
		if err := rows.Scan(&o.Kind, &o.Name, &o.Version, &o.UpdatedAt); err != nil {
			return "", unavailable("read the objects' mark", err)
		}
		o.UpdatedAt = s.fromDB(o.UpdatedAt)
		list = append(list, o)
	}
	if err := rows.Err(); err != nil {
		return "", unavailable("read the objects' mark", err)
	}
	return store.MarkOf(list), nil
}

// ListenObjects implements store.Objects: LISTEN on a connection of its
// own (taken from the pool and never given back), reconnecting after a
// failure (listenLoop), calling changed after each connect.
func (s *Store) ListenObjects(ctx context.Context, changed func()) error {
	s.listenLoop(ctx, objectsChannel, "object change notifications", changed)
	return nil
}
