// Package actor names who makes a change, for the audit log: an API token
// ("token:ops"), the CLI's user ("cli:alice"), a Go program ("library").
// Authentication puts the name in the request's context; the operator's
// service reads it when it writes the audit entry. It sits below both, so
// neither imports the other.
package actor

import "context"

type key struct{}

// With returns ctx naming who acts.
func With(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, key{}, name)
}

// Of returns who acts with ctx, and false when nobody is named.
func Of(ctx context.Context) (string, bool) {
	name, ok := ctx.Value(key{}).(string)
	return name, ok && name != ""
}

// Token is the name of a caller authenticated by an API token.
func Token(name string) string { return "token:" + name }
