package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/oncehook/oncehook/store"
)

const objectColumns = `kind, name, tenant, version, spec, created_at, updated_at, created_by, updated_by`

type rowScanner interface{ Scan(dest ...any) error }

func scanObject(r rowScanner) (store.Object, error) {
	var o store.Object
	var spec string
	var created, updated int64
	if err := r.Scan(&o.Kind, &o.Name, &o.Tenant, &o.Version, &spec, &created, &updated, &o.CreatedBy, &o.UpdatedBy); err != nil {
		return o, err
	}
	o.Spec, o.CreatedAt, o.UpdatedAt = []byte(spec), fromMS(created), fromMS(updated)
	return o, nil
}

// objectChange runs fn in a write transaction with audit, and returns
// the object fn wrote.
func (s *Store) objectChange(ctx context.Context, op string, entry store.AuditEntry, fn func(tx *sql.Tx, now time.Time) (store.Object, error)) (store.Object, error) {
	tx, done, err := s.begin(ctx, op)
	if err != nil {
		return store.Object{}, err
	}
	defer done()
	defer tx.Rollback()
	now := time.Now()
	o, err := fn(tx, now)
	if err != nil {
		return store.Object{}, err
	}
	entry.Count = 1
	if err := audit(ctx, tx, entry, now); err != nil {
		return store.Object{}, err
	}
	if err := tx.Commit(); err != nil {
		return store.Object{}, unavailable(op, err)
	}
	return o, nil
}

// CreateObject implements store.Objects: the primary key decides a name
// taken (ON CONFLICT DO NOTHING), never a read before.
func (s *Store) CreateObject(ctx context.Context, o store.Object, audit store.AuditEntry) (store.Object, error) {
	return s.objectChange(ctx, "create object", audit, func(tx *sql.Tx, now time.Time) (store.Object, error) {
		row := tx.QueryRowContext(ctx, `INSERT INTO objects (`+objectColumns+`) VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?)
			ON CONFLICT (kind, name) DO NOTHING RETURNING `+objectColumns,
			o.Kind, o.Name, o.Tenant, string(o.Spec), ms(now), ms(now), audit.Actor, audit.Actor)
		got, err := scanObject(row)
		if errors.Is(err, sql.ErrNoRows) {
			return got, fmt.Errorf("%s %s: %w", o.Kind, o.Name, store.ErrObjectExists)
		}
		if err != nil {
			return got, failed("create object", err)
		}
		return got, nil
	})
}

// Object implements store.Objects.
func (s *Store) Object(ctx context.Context, kind, name string) (store.Object, error) {
	o, err := scanObject(s.read.QueryRowContext(ctx, `SELECT `+objectColumns+` FROM objects WHERE kind = ? AND name = ?`, kind, name))
	if errors.Is(err, sql.ErrNoRows) {
		return o, fmt.Errorf("%s %s: %w", kind, name, store.ErrNotFound)
	}
	if err != nil {
		return o, unavailable("read object", err)
	}
	return o, nil
}

// ListObjects implements store.Objects.
func (s *Store) ListObjects(ctx context.Context, kind string) ([]store.Object, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+objectColumns+` FROM objects WHERE ? = '' OR kind = ? ORDER BY kind, name`, kind, kind)
	if err != nil {
		return nil, unavailable("list objects", err)
	}
	defer rows.Close()
	var out []store.Object
	for rows.Next() {
		o, err := scanObject(rows)
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
// optimistic check, decided by the write itself.
func (s *Store) UpdateObject(ctx context.Context, o store.Object, version int64, audit store.AuditEntry) (store.Object, error) {
	return s.objectChange(ctx, "update object", audit, func(tx *sql.Tx, now time.Time) (store.Object, error) {
		row := tx.QueryRowContext(ctx, `UPDATE objects SET spec = ?, tenant = ?, version = version + 1, updated_at = ?, updated_by = ?
			WHERE kind = ? AND name = ? AND version = ? RETURNING `+objectColumns,
			string(o.Spec), o.Tenant, ms(now), audit.Actor, o.Kind, o.Name, version)
		got, err := scanObject(row)
		if errors.Is(err, sql.ErrNoRows) {
			return got, missedObject(ctx, tx, o.Kind, o.Name, version)
		}
		if err != nil {
			return got, failed("update object", err)
		}
		return got, nil
	})
}

// DeleteObject implements store.Objects.
func (s *Store) DeleteObject(ctx context.Context, kind, name string, version int64, audit store.AuditEntry) error {
	_, err := s.objectChange(ctx, "delete object", audit, func(tx *sql.Tx, _ time.Time) (store.Object, error) {
		res, err := tx.ExecContext(ctx, `DELETE FROM objects WHERE kind = ? AND name = ? AND (? = 0 OR version = ?)`, kind, name, version, version)
		if err != nil {
			return store.Object{}, failed("delete object", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return store.Object{}, missedObject(ctx, tx, kind, name, version)
		}
		return store.Object{}, nil
	})
	return err
}

// missedObject says why a change of kind and name at version wrote
// nothing: the object is gone, or its version moved on.
func missedObject(ctx context.Context, tx *sql.Tx, kind, name string, version int64) error {
	var now int64
	err := tx.QueryRowContext(ctx, `SELECT version FROM objects WHERE kind = ? AND name = ?`, kind, name).Scan(&now)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%s %s: %w", kind, name, store.ErrNotFound)
	case err != nil:
		return unavailable("read object", err)
	}
	return fmt.Errorf("%s %s is at version %d, not %d: %w", kind, name, now, version, store.ErrVersionConflict)
}

// ObjectsMark implements store.Objects: the objects' kinds, names,
// versions and update times, no spec.
func (s *Store) ObjectsMark(ctx context.Context) (string, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT kind, name, version, updated_at FROM objects ORDER BY kind, name`)
	if err != nil {
		return "", unavailable("read the objects' mark", err)
	}
	defer rows.Close()
	var list []store.Object
	for rows.Next() {
		var o store.Object
		var updated int64
		if err := rows.Scan(&o.Kind, &o.Name, &o.Version, &updated); err != nil {
			return "", unavailable("read the objects' mark", err)
		}
		o.UpdatedAt = fromMS(updated)
		list = append(list, o)
	}
	if err := rows.Err(); err != nil {
		return "", unavailable("read the objects' mark", err)
	}
	return store.MarkOf(list), nil
}

// ListenObjects implements store.Objects: SQLite cannot announce
// commits; a replica polls ObjectsMark.
func (s *Store) ListenObjects(ctx context.Context, changed func()) error {
	return fmt.Errorf("sqlite: listen for object changes: %w", store.ErrNotSupported)
}
