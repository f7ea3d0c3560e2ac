// Package tenant answers whose a source or destination is: the tenant
// that owns it, by name, for one running config.
//
// Every check of a tenant's reach reads it (the admin API's narrowing,
// the objects API's 404 for another tenant's object, the publish and
// pull routes, the alerts' channels), so that "whose is this name" has
// one meaning in one place. It is built once when a config is swapped
// in (at start, at a reload, at an API change of the objects) and read
// in constant time after: a tenant's call does not grow with the other
// tenants' objects.
package tenant

// Kinds of the objects an Index holds: store.ObjectSource and
// store.ObjectDestination, which are also store.ScopeSource and
// store.ScopeDestination (this package imports no store).
const (
	Source      = "source"
	Destination = "destination"
)

// Index is one config's owners of its sources and destinations. It is
// never changed once built: a new config gets a new Index.
type Index struct {
	sources      map[string]string   // name -> tenant ("" for a shared one)
	destinations map[string]string   // name -> tenant
	sourcesOf    map[string][]string // tenant -> its sources' names, in the config's order
	tenanted     bool                // some object has a tenant
}

// Object is a source or destination as the Index reads it.
type Object struct {
	Name   string
	Tenant string // "" for none: a shared object, the operator's
}

// NewIndex indexes sources and destinations (each in its config's
// order; a name given twice keeps its first tenant, as a config that
// passed its check never does).
func NewIndex(sources, destinations []Object) *Index {
	x := &Index{
		sources:      make(map[string]string, len(sources)),
		destinations: make(map[string]string, len(destinations)),
		sourcesOf:    map[string][]string{},
	}
	for _, s := range sources {
		if _, dup := x.sources[s.Name]; dup {
			continue
		}
		x.sources[s.Name] = s.Tenant
		x.tenanted = x.tenanted || s.Tenant != ""
		x.sourcesOf[s.Tenant] = append(x.sourcesOf[s.Tenant], s.Name)
	}
	for _, d := range destinations {
		if _, dup := x.destinations[d.Name]; !dup {
			x.destinations[d.Name] = d.Tenant
			x.tenanted = x.tenanted || d.Tenant != ""
		}
	}
	return x
}

// Of is the tenant of the object of kind (Source or Destination) and
// name, and whether the config has it ("" and false for no such object;
// "" and true for a shared one).
func (x *Index) Of(kind, name string) (string, bool) {
	m := x.destinations
	if kind == Source {
		m = x.sources
	}
	t, ok := m[name]
	return t, ok
}

// Owns reports whether the object of kind and name is tenant's.
func (x *Index) Owns(tenant, kind, name string) bool {
	t, ok := x.Of(kind, name)
	return ok && t == tenant
}

// SourcesOf are the names of tenant's sources, in the config's order,
// never nil (an empty list narrows a query to nothing). The caller may
// change the list it gets.
func (x *Index) SourcesOf(tenant string) []string {
	return append([]string{}, x.sourcesOf[tenant]...)
}

// Tenanted reports whether any object has a tenant: a config of none has
// nothing to narrow.
func (x *Index) Tenanted() bool { return x.tenanted }
