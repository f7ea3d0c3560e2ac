// Package hostile holds no code: its tests send hostile bytes (NUL,
// invalid UTF-8, lone surrogates, CR/LF, 1 MB) through every field that
// reaches the store, over every transport and both backends, against a
// real gateway. They are a package of their own, not the root's, so that
// go test runs them beside the rest: the sweep alone takes minutes under
// the race detector.
package hostile
