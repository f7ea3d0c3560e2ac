package store

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strconv"
	"time"
)

// Objects keeps the sources and destinations created at runtime (through
// the API), beside the ones the config file names: each a kind, a name and
// its spec, versioned, every change audited in its own transaction. It is
// part of Store, so that every replica reads the same objects.
//
// The store keeps a spec as given: JSON under the config file's field
// names, its secrets already sealed by the caller (internal/secretbox).
// It never reads a spec; what one means is the config's to check.
type Objects interface {
	// CreateObject stores o at version 1, with its CreatedAt and UpdatedAt
	// (its CreatedBy and UpdatedBy are audit's actor), and audit in the
	// same transaction, and returns it as stored. A kind and name already
	// stored is ErrObjectExists, and nothing is written: the store's
	// unique key decides, never a read before the insert.
	CreateObject(ctx context.Context, o Object, audit AuditEntry) (Object, error)
	// Object returns the stored object of kind and name, or ErrNotFound.
	Object(ctx context.Context, kind, name string) (Object, error)
	// ListObjects lists the stored objects of kind ("" for every kind), by
	// kind and name.
	ListObjects(ctx context.Context, kind string) ([]Object, error)
	// UpdateObject replaces the spec (and tenant) of the stored object
	// o.Kind, o.Name, if its version is still version, bumps the version
	// and sets UpdatedAt and UpdatedBy (audit's actor), with audit, in one
	// transaction; it returns the object as stored. One whose version
	// moved on (another change came first) is ErrVersionConflict, one
	// that is gone ErrNotFound; neither writes anything.
	UpdateObject(ctx context.Context, o Object, version int64, audit AuditEntry) (Object, error)
	// DeleteObject deletes the stored object of kind and name, with
	// audit, if its version is still version (0: whatever it is). Gone
	// already is ErrNotFound; a version that moved on, ErrVersionConflict.
	DeleteObject(ctx context.Context, kind, name string, version int64, audit AuditEntry) error
	// ObjectsMark is the stored objects' mark (MarkOf): it moves with
	// every create, update and delete, and reads no spec, so a replica
	// may poll it to learn that another changed them.
	ObjectsMark(ctx context.Context) (string, error)
	// ListenObjects calls changed whenever a transaction (on any replica)
	// commits a change to the objects, and after each (re)connect (what
	// was announced meanwhile is lost), until ctx ends, and then returns
	// nil. A backend without notifications (SupportsListener false)
	// returns at once an error wrapping ErrNotSupported.
	ListenObjects(ctx context.Context, changed func()) error
}

// The kinds of stored objects.
const (
	ObjectSource      = "source"
	ObjectDestination = "destination"
	// ObjectToken is an API token created through the API: its spec
	// holds its hash, never its value.
	ObjectToken = "token"
)

// ErrObjectExists is a create whose kind and name are already stored.
var ErrObjectExists = errors.New("an object of that kind and name already exists")

// ErrVersionConflict is a change made against a version that is no longer
// the stored one: another change came first. Read the object again.
var ErrVersionConflict = errors.New("the object changed since the version given")

// Object is one stored source or destination.
type Object struct {
	Kind string // ObjectSource, ObjectDestination or ObjectToken
	Name string
	// Tenant owns the object ("" for none); kept now so that tenants
	// need no migration of what is stored.
	Tenant string
	// Version is 1 at creation and one more at each update.
	Version int64
	// Spec is the object as JSON under the config file's field names,
	// its secrets sealed.
	Spec      []byte
	CreatedAt time.Time
	UpdatedAt time.Time
	CreatedBy string
	UpdatedBy string
}

// MarkOf is a digest of objects' kinds, names, versions and update times,
// in any order: the same objects give the same mark, and a create, an update or a delete (a delete and a
// create again of one name included: its update time differs) another.
// The specs are not in it: a change to one is a new version.
func MarkOf(objects []Object) string {
	objects = slices.Clone(objects)
	slices.SortFunc(objects, func(a, b Object) int { return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name)) })
	h := sha256.New()
	for _, o := range objects {
		h.Write([]byte(o.Kind + "\x00" + o.Name + "\x00" + strconv.FormatInt(o.Version, 10) + "\x00" + strconv.FormatInt(o.UpdatedAt.UnixNano(), 10) + "\n"))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}
